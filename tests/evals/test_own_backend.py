"""A user's own backend, written to the `KernelBackend` protocol alone and registered by name, runs a whole
experiment: the commands open and close it through the protocol's `close`, never assuming it is a context
manager, and its own prompt contract (the package it names) reaches the model. The model is a scripted TEST
DOUBLE; the backend delegates to the real cpu backend."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from tests.graph.scripts import SLOW, candidate

from kernelsage.evals.experiment import Experiment, run_experiment
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.model import Task
from kernelsage.tools import backend as backends
from kernelsage.tools.backend import get_backend, register_backend
from kernelsage.tools.results import Artifact, Candidate, CompileResult, ProfileResult, VerifyResult


class ProtocolOnlyBackend:
    """Exactly the protocol: no kernelsage base class, no `__enter__`/`__exit__`."""

    name = "mine"
    candidate_files: tuple[str, ...] = ("kernel.cpp",)
    contract_package = "tests.evals.own_backend"  # its prompt_contract.md and *.h describe a candidate

    def __init__(self) -> None:
        self.inner = get_backend("cpu", trials=2, reps=20)
        self.calls: list[str] = []
        self.closed = False

    def compile(self, candidate: Candidate, *, task: Task | None = None) -> CompileResult:
        self.calls.append("compile")
        return self.inner.compile(candidate, task=task)

    def verify(self, artifact: Artifact, task: Task) -> VerifyResult:
        self.calls.append("verify")
        return self.inner.verify(artifact, task)

    def profile(self, artifact: Artifact, task: Task) -> ProfileResult:
        self.calls.append("profile")
        return self.inner.profile(artifact, task)

    def close(self) -> None:
        self.closed = True
        self.inner.close()


def test_a_backend_written_to_the_protocol_alone_runs_an_experiment_and_is_closed(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "_FACTORIES", dict(backends._FACTORIES))  # the registration ends with the test
    made: list[ProtocolOnlyBackend] = []
    register_backend("mine", lambda: made.append(ProtocolOnlyBackend()) or made[-1])
    order = tmp_path / "order.txt"
    order.write_text("l1_relu\n")
    run_id = f"own-{uuid.uuid4().hex[:6]}"
    experiment = Experiment(run_id=run_id, run_dir=tmp_path / run_id, model="scripted", backend="mine",
                            namespace=f"own-{run_id}", order=f"file:{order}", budget=1)
    model = ScriptedChatModel([candidate(SLOW), "- Clamp negatives to zero with one comparison."])
    records = run_experiment(experiment, model=model, url=database_url)["sage"]
    assert [(r.task_id, r.solved) for r in records] == [("l1_relu", True)]
    assert len(made) == 1 and made[0].calls == ["compile", "verify", "profile"] and made[0].closed
    writing = next(str(m.content) for m in model.requests[0] if isinstance(m, HumanMessage))
    assert writing.startswith("# Task l1_relu") and "documents no ABI header" not in writing
    assert "MINE-CONTRACT-MARK" in writing and "// mine_abi.h: #include it" in writing
    assert "MINE-HEADER-MARK" in writing and "the mine backend" in str(model.requests[0][0].content)
