"""Races between a launch's programs on the interpreter (sandbox/runner.py, InterpreterRaces): the interpreter runs
programs one after another, so a plain read-modify-write shared by programs gave the right answer there and a wrong
one on a GPU. The runner now shuffles each launch's programs and fails a byte one program stored and another
touched without atomics."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tests.tools.triton.conftest import HERE

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.results import Candidate, Status
from kernelsage.tools.triton.sandbox.runner import InterpreterRaces

ATTACKS = HERE / "attacks"
REPO = HERE.parents[2]
WITH_RACE_CHECK = ("import sys, triton.runtime.interpreter\n"
                   "from kernelsage.tools.triton.sandbox.runner import InterpreterRaces\n"
                   "InterpreterRaces().install(triton.runtime.interpreter)\n"
                   "from tests.tools.triton import verify_examples\n"
                   "verify_examples.main()\n")


@pytest.fixture(scope="module")
def sum_lastdim():
    return find_task(load_suite("builtin", task_ids=["l1_sum_lastdim"]), "l1_sum_lastdim")


def verify(triton_backend, task, name: str):
    compiled = triton_backend.compile(Candidate(task_id=task.id, files={"kernel.py": (ATTACKS / name).read_text()}))
    assert compiled.ok, compiled.log
    return triton_backend.verify(compiled.artifact, task)


def test_a_read_modify_write_shared_by_programs_fails_as_a_race(triton_backend, sum_lastdim) -> None:
    verified = verify(triton_backend, sum_lastdim, "race_sum.py")
    assert verified.status is Status.RUNTIME_ERROR and not verified.correct, verified.message
    assert "without atomics" in verified.message, verified.message


@pytest.mark.parametrize("name", ["race_sum_atomic.py", "race_sum_locked.py"])
def test_the_same_sum_with_atomics_or_under_a_lock_passes(triton_backend, sum_lastdim, name) -> None:
    verified = verify(triton_backend, sum_lastdim, name)
    assert verified.status is Status.OK and verified.correct, verified.message


def test_each_launch_runs_every_program_once_in_a_fresh_order() -> None:
    races = InterpreterRaces()
    orders = set()
    for _ in range(20):
        races.begin((3, 4, 2))
        ran = [races.next_program(x, y, z) for x in range(3) for y in range(4) for z in range(2)]
        assert sorted(ran) == [(x, y, z) for x in range(3) for y in range(4) for z in range(2)]
        orders.add(tuple(ran))
    assert len(orders) > 1


def test_the_reference_kernels_pass_with_the_race_check() -> None:
    completed = subprocess.run([sys.executable, "-c", WITH_RACE_CHECK], capture_output=True, text=True, timeout=900,
                               check=False, cwd=REPO,
                               env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)})
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = [json.loads(line) for line in completed.stdout.splitlines()]
    assert len(results) >= 15
    assert [r for r in results if r["status"] != "ok" or r["problems"]] == []
