"""The reference kernels with tunables are correct for every allowed value: the cpu ones built through the
backend with each value (every value of every parameter appears in one of the configurations built) and verified
on the task's cases; a value the declaration does not list fails the build; the Triton ones run under the
interpreter with each of their autotune configurations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.results import Candidate, Status
from kernelsage.tuning.cpu_tunables import TUNING_HEADER, apply_cpu_config, cpu_space
from kernelsage.tuning.space import Config, TuningSpace

HERE = Path(__file__).resolve().parent
TOOLS = HERE.parents[1] / "src" / "kernelsage" / "tools"
TUNABLE = ("l3_matmul", "l2_softmax", "l2_add_rms_norm")


def covering(space: TuningSpace) -> list[Config]:
    """Configurations in which every value of every parameter appears at least once (the i-th value of each)."""
    longest = max(len(p.values) for p in space.parameters)
    return [tuple((p.name, p.values[i % len(p.values)]) for p in space.parameters) for i in range(longest)]


@pytest.mark.parametrize("task_id", TUNABLE)
def test_each_cpu_tunable_kernel_is_correct_for_every_allowed_value(tuning_backend, task_id: str) -> None:
    # 5-6 builds and verifies of one kernel: about 3-6 s on a quiet 2-core machine.
    task = find_task(load_suite("builtin", task_ids=[task_id]), task_id)
    files = {"kernel.cpp": (TOOLS / "cpu" / "examples" / "tunable" / f"{task_id}.cpp").read_text()}
    for config in covering(cpu_space(files)):
        built = tuning_backend.compile(Candidate(task_id=task_id, files=apply_cpu_config(files, config)))
        assert built.ok, (config, built.log)
        verified = tuning_backend.verify(built.artifact, task)
        assert verified.correct, (config, verified.message)


def test_a_value_the_declaration_does_not_list_fails_the_build(tuning_backend) -> None:
    files = {"kernel.cpp": (TOOLS / "cpu" / "examples" / "tunable" / "l2_softmax.cpp").read_text(),
             TUNING_HEADER: "#define KS_TUNE_LANES KS_TUNED(3)\n"}
    built = tuning_backend.compile(Candidate(task_id="l2_softmax", files=files))
    assert built.status is Status.COMPILE_ERROR and "KS_TUNE_LANES is not a value KS_TUNABLE lists" in built.log


def test_each_triton_tunable_kernel_is_correct_for_every_config_under_the_interpreter() -> None:
    # One process for all (torch and triton start once): about 5-10 s, most of it the imports.
    pytest.importorskip("triton", reason="the triton extra is not installed (pip install -e '.[triton]')")
    completed = subprocess.run([sys.executable, str(HERE / "check_triton_tunables.py")], capture_output=True,
                               text=True, timeout=300, check=False, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = [json.loads(line) for line in completed.stdout.splitlines()]
    assert sorted({r["task"] for r in results}) == sorted(TUNABLE) and len(results) >= 3 * len(TUNABLE)
    assert [r for r in results if set(r["statuses"]) != {"ok"}] == []
