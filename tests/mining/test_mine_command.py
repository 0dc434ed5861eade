"""`kernelsage memory mine` in-process (the chat model and the embeddings replaced by test doubles, the backend and
database real), what `memory show` / `stats` say of mined items, and `compare` starting from the mined memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelsage.cli import app
from kernelsage.evals.experiment import Experiment, prepare_memories
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.mining.proposals import render_variants
from kernelsage.models.scripted import ScriptedChatModel
from tests.graph.fakes import fake_embeddings
from tests.mining.test_mining import KERNELS, variants

FIXTURE_SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "suite"


@pytest.fixture
def doubles(monkeypatch: pytest.MonkeyPatch, database_url: str) -> list[ScriptedChatModel]:
    import kernelsage.memory_backend.embeddings as embeddings
    import kernelsage.models.factory as factory

    original = (KERNELS / "relu32.cpp").read_text()
    models: list[ScriptedChatModel] = []

    def scripted(spec: str, **_: object) -> ScriptedChatModel:
        models.append(ScriptedChatModel([render_variants(variants(original)[:3])]))
        return models[-1]

    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setattr(factory, "make_chat_model", scripted)
    monkeypatch.setattr(embeddings, "make_embeddings", lambda spec=None: fake_embeddings())
    return models


def test_mine_then_show_stats_and_compare_from_the_mined_namespace(
        doubles: list[ScriptedChatModel], store: MemoryStore, namespace: str, tmp_path: Path) -> None:
    runner = CliRunner()
    command = ["memory", "mine", "--from", str(KERNELS), "--task-suite", str(FIXTURE_SUITE), "-n", namespace,
               "--model", "openai:scripted", "--run-id", "m1", "--run-dir", str(tmp_path / "m1")]
    first = runner.invoke(app, [*command, "--json"])
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout.strip().splitlines()[-1])
    assert report["lessons"] == 1 and report["evaluations"] == 1 + 3 + 2
    [kernel] = report["kernels"]
    assert (kernel["proposed"], kernel["correct"], kernel["kept"], kernel["discarded"]) == (3, 2, 1, 2)
    assert "relu32: 'single pass': kept" in first.stderr

    again = runner.invoke(app, command)  # resumed: the model is never asked, nothing evaluated
    assert again.exit_code == 0, again.output
    assert doubles[1].requests == [] and "0 evaluations this time" in again.stdout
    assert "+ single pass:" in again.stdout and "- branch-free select: incorrect" in again.stdout

    stats = runner.invoke(app, ["memory", "stats", "-n", namespace, "--json"])
    by_provenance = json.loads(stats.stdout)["by_provenance"]
    assert by_provenance["mined"] == 1 and by_provenance["knowledge"] > 0  # the cpu pack seeded the namespace
    shown = runner.invoke(app, ["memory", "show", "-n", namespace, "--json", "--limit", "100"])
    mined = [item for item in json.loads(shown.stdout) if item["provenance"] == "mined"]
    assert [item["metadata"]["optimization"] for item in mined] == ["single pass"]
    assert " mined " in runner.invoke(app, ["memory", "show", "-n", namespace, "--limit", "100"]).stdout

    # compare -n NAMESPACE gives every policy its own copy of the mined memory before the stream
    experiment = Experiment(run_id="c1", run_dir=tmp_path / "c1", model="openai:scripted",
                            policies=["sage", "value"], namespace=namespace)
    prepare_memories(store, experiment, fake_embeddings(), "cpu")
    for policy in experiment.policies:
        copy = store.open(experiment.policy_namespace(policy), read_only=True).stats()
        assert copy["by_provenance"] == json.loads(stats.stdout)["by_provenance"]


def test_mine_refuses_two_kernel_sources(doubles: list[ScriptedChatModel], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["memory", "mine", "--from", str(tmp_path), "--suite", str(tmp_path),
                                      "--model", "openai:scripted"])
    assert result.exit_code != 0 and "--from and --suite both name the kernels" in str(result.exception)


def test_mine_says_when_a_suite_has_no_reference_answers(doubles: list[ScriptedChatModel], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["memory", "mine", "--suite", str(FIXTURE_SUITE), "--model", "openai:scripted",
                                      "--run-dir", str(tmp_path / "run")])
    assert result.exit_code != 0
    assert "no task has reference answers for backend 'cpu'" in str(result.exception)
