"""The sandbox itself: what a child sees, and that the worker outlives its children."""

from __future__ import annotations

import os
import socket

import pytest

from kernelsage.tools.results import Status
from kernelsage.tools.sandbox import ChildOutcome, Limits, Sandbox, classify_crash


@pytest.fixture
def sandbox():
    box = Sandbox(threads=1)
    yield box
    box.close()


def test_child_sees_no_secrets_and_works_in_its_private_directory(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-kernels")
    monkeypatch.setenv("DATABASE_URL", "postgresql://secret")
    workdir = sandbox.workdir()
    outcome = sandbox.run("kernelsage.tools.worker:probe", {}, Limits(wall_s=20), workdir)
    seen = outcome.result()
    assert seen is not None, outcome.stderr_tail
    assert "OPENAI_API_KEY" not in seen["env"] and "DATABASE_URL" not in seen["env"]
    assert os.path.realpath(seen["cwd"]) == os.path.realpath(workdir)
    assert seen["address_space_limit"] > 0 and seen["cpu_limit"] == 120
    sandbox.discard(workdir)
    assert not workdir.exists()


def test_child_network_is_cut_off_where_the_os_allows(sandbox):
    with socket.socket() as server:  # a listener the child could reach if it shared our network
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        outcome = sandbox.run("kernelsage.tools.worker:probe", {"port": port}, Limits(wall_s=20), sandbox.workdir())
    seen = outcome.result()
    if not outcome.network_isolated:
        pytest.skip("this OS does not let an unprivileged process create a network namespace")
    assert seen["network"] != "connected"


def test_unknown_handler_is_reported_and_the_worker_keeps_serving(sandbox):
    broken = sandbox.run("kernelsage.tools.nowhere:nothing", {}, Limits(wall_s=20), sandbox.workdir())
    assert "ModuleNotFoundError" in broken.prepare_error
    outcome = sandbox.run("kernelsage.tools.worker:probe", {}, Limits(wall_s=20), sandbox.workdir())
    assert outcome.result() is not None


@pytest.mark.parametrize(("phase", "status"), [("candidate", Status.TIMEOUT), ("compile", Status.TIMEOUT),
                                               ("reference", Status.HARNESS_ERROR), ("compare", Status.HARNESS_ERROR),
                                               ("", Status.HARNESS_ERROR)])
def test_a_timeout_is_blamed_on_the_phase_it_happened_in(phase, status):
    events = [{"kind": "phase", "phase": phase}] if phase else []
    blamed, message = classify_crash(ChildOutcome(timed_out=True, events=events), Limits(wall_s=3))
    assert blamed is status, message


def test_failures_of_the_trusted_child_and_the_worker_are_the_harness_fault():
    crashed = ChildOutcome(signal=11, events=[{"kind": "phase", "phase": "candidate"}])
    out_of_memory = ChildOutcome(events=[{"kind": "phase", "phase": "reference"},
                                         {"kind": "error", "type": "MemoryError", "message": ""}])
    lost = ChildOutcome(worker_error="the sandbox worker stopped answering")
    for outcome in (crashed, out_of_memory, lost):
        assert classify_crash(outcome, Limits())[0] is Status.HARNESS_ERROR
    assert "ran out of memory in its 'reference' phase" in classify_crash(out_of_memory, Limits())[1]
