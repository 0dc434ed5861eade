"""Scripted episodes that declare adoptions truly and falsely: the audit tells them apart, `adoption=audited`
credits only the true ones (in the real database), and `kernelsage memory audit` and the report say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.evals.records import EpisodeRecord
from kernelsage.evals.report import write_report
from kernelsage.evals.stream import StreamSettings, episode_record
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.tasks.loaders import find_task
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import SLOW, candidate

FP16_LOOP = "    for (int64_t i = 0; i < n; ++i) { float v"
# The candidate parallelises its float16 loop (item "pragma" is really used) and mentions __restrict__ only in
# a comment (item "restrict" is declared adopted, but nothing in the code follows it).
TRUE_AND_FALSE = SLOW.replace(FP16_LOOP, "    // __restrict__ pointers were considered\n"
                                         "    #pragma omp parallel for\n" + FP16_LOOP)
ITEMS = {
    "pragma": NewItem(text="Parallelise elementwise loops with `#pragma omp parallel for`", operator="l1_add"),
    "restrict": NewItem(text="Mark the pointers `__restrict__` so the compiler can vectorise", operator="l1_abs"),
    "helpers": NewItem(text="Handle float16 by converting through float with the header helpers",
                       operator="l1_sigmoid"),
}


@pytest.fixture
def items(store: MemoryStore, namespace: str) -> dict[str, int]:
    ids = store.open(namespace, embeddings=fake_embeddings()).add_items(list(ITEMS.values()))
    return dict(zip(ITEMS, ids, strict=True))


def run_declaring_both(episode, items: dict[str, int], adoption: str) -> dict:
    assert TRUE_AND_FALSE != SLOW
    adopted = {items["pragma"], items["restrict"]}
    state, _ = episode([candidate(TRUE_AND_FALSE, adopt=lambda shown: adopted & set(shown))], budget=1, top_k=3,
                       params={"adoption": adoption})
    assert [a["status"] for a in state["attempts"]] == ["ok"]
    assert {a["item_id"] for a in state["adoption"] if a["adopted"]} == adopted  # the declarations, as made
    return state


@pytest.mark.parametrize("adoption", ["declared", "audited"])
def test_the_audit_tells_true_from_false_adoptions_and_audited_credits_only_the_true(
        episode, items: dict[str, int], store: MemoryStore, namespace: str, adoption: str) -> None:
    state = run_declaring_both(episode, items, adoption)
    update = state["memory_update"]
    checks = {c["item_id"]: c for c in update["audit"]}
    assert set(checks) == {items["pragma"], items["restrict"]}  # the declared ones, whatever is credited
    assert checks[items["pragma"]]["evidenced"] and checks[items["pragma"]]["matched"] == ["#pragma omp parallel for"]
    assert not checks[items["restrict"]]["evidenced"]  # named in a comment only
    assert update["adoption"] == adoption

    # One solved round: z = 0, so an adopted item is credited 0 and a shown but not adopted one -beta.
    memory = store.open(namespace, embeddings=fake_embeddings())
    restrict, pragma, helpers = (memory.get_item(items[k]) for k in ("restrict", "pragma", "helpers"))
    assert pragma.n_ado == 1 and pragma.utility == pytest.approx(0.0)
    assert helpers.n_ado == 0 and helpers.utility == pytest.approx(-0.2)
    if adoption == "declared":  # the method: the declaration is credited as made
        assert restrict.n_ado == 1 and restrict.utility == pytest.approx(0.0) and restrict.adopting_ops
    else:  # audited: the unevidenced declaration is credited as shown but not adopted
        assert restrict.n_ado == 0 and restrict.utility == pytest.approx(-0.2) and not restrict.adopting_ops
    assert update["credits"][str(items["restrict"])] == pytest.approx(0.0 if adoption == "declared" else -0.2)
    assert memory.stats()["last_episode_params"]["adoption"] == adoption  # recorded with the episode
    stored = memory.load_episode(state["episode_id"])
    if adoption == "audited":
        assert stored.metadata["declared_adopted"] == sorted([items["pragma"], items["restrict"]])
        assert stored.metadata["evidenced"] == [items["pragma"]]
        flagged = next(e for e in stored.exposures if e.item_id == items["restrict"])
        assert not flagged.adopted and flagged.rationale.startswith("[audit: declared adopted, no evidence")


def _write_run(state: dict, suite, namespace: str, run_dir: Path, policy: str) -> None:
    record = episode_record(state, task=find_task(suite, "l1_relu"), position=0, seconds=1.0, memory=None,
                            settings=StreamSettings(run_id=f"r/{policy}", policy=policy, namespace=namespace,
                                                    model="scripted-test-double", backend="cpu"))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / f"{policy}.jsonl").write_text(record.model_dump_json() + "\n", encoding="utf-8")


def _kernelsage(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env={**os.environ, "DATABASE_URL": ""})


def test_memory_audit_and_the_report_show_declared_evidenced_and_the_agreement(
        episode, items: dict[str, int], suite, namespace: str, tmp_path: Path) -> None:
    state = run_declaring_both(episode, items, "audited")
    run_dir = tmp_path / "runs" / "r1"
    _write_run(state, suite, namespace, run_dir, "sage")

    result = _kernelsage("memory", "audit", "--run", "r1", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    payload = json.loads(result.stdout)
    [sage] = payload["policies"]
    assert (sage["policy"], sage["declared"], sage["evidenced"], sage["adoption"]) == ("sage", 2, 1, ["audited"])
    assert sage["agreement"]["value"] == pytest.approx(0.5)
    by_item = {i["item_id"]: i for i in sage["items"]}
    assert by_item[items["pragma"]]["evidenced"] == 1 and by_item[items["restrict"]]["evidenced"] == 0
    assert by_item[items["pragma"]]["matched"] == ["#pragma omp parallel for"]

    table = _kernelsage("memory", "audit", "--run", "r1", cwd=tmp_path)
    assert table.returncode == 0, table.stderr[-2000:]
    assert "50.0% (1/2) of declared adoptions evidenced" in table.stdout
    assert "#pragma omp parallel for" in table.stdout and "none of its" in table.stdout

    report = write_report({"sage": [EpisodeRecord.model_validate_json((run_dir / "sage.jsonl").read_text())]},
                          tmp_path / "report", title="audit")
    markdown = report.markdown.read_text()
    assert "## Adoption audit" in markdown and "| sage | audited | 2 | 1 | 50.0% (1/2) | 0 |" in markdown


def test_memory_audit_refuses_an_unknown_run_or_policy_in_one_line(tmp_path: Path) -> None:
    result = _kernelsage("memory", "audit", "--run", "nope", cwd=tmp_path)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1 and "Traceback" not in result.stderr
    assert "run 'nope': no run directory" in errors[0]
    (tmp_path / "runs" / "r2").mkdir(parents=True)
    (tmp_path / "runs" / "r2" / "sage.jsonl").write_text("")
    other = _kernelsage("memory", "audit", "--run", "r2", "--policy", "uniform", cwd=tmp_path)
    assert other.returncode == 2 and "has no records of policy 'uniform'" in other.stderr
    assert "Traceback" not in other.stderr


def test_a_bad_adoption_setting_is_refused_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kernelsage", "run", "--model", "openai:m", "--adoption", "trusted"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL,
                            env={**os.environ, "DATABASE_URL": "", "KERNELSAGE_HOME": str(tmp_path / "home"),
                                 "KERNELSAGE_MODEL_API_KEY": "sk-test"})
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
    assert "adoption='trusted' must be one of declared, audited" in errors[0]
    clash = subprocess.run([sys.executable, "-m", "kernelsage", "run", "--model", "openai:m", "--adoption", "audited",
                            "--param", "adoption=declared"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=120, stdin=subprocess.DEVNULL,
                           env={**os.environ, "DATABASE_URL": "", "KERNELSAGE_HOME": str(tmp_path / "home"),
                                "KERNELSAGE_MODEL_API_KEY": "sk-test"})
    assert clash.returncode == 2 and "--adoption audited and --param adoption=declared disagree" in clash.stderr


def test_the_adoption_setting_is_kept_in_the_runs_parameters(tmp_path: Path) -> None:
    from kernelsage.evals.experiment import Experiment, run_metadata

    experiment = Experiment(run_id="r3", run_dir=tmp_path, model="openai:m", params={"adoption": "audited"})
    assert run_metadata(experiment, "openai:m", "postgresql://u@h/db").params == {"adoption": "audited"}
