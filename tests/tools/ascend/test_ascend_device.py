"""On an Ascend host (CANN sourced, torch_npu installed, an NPU listed by npu-smi): the built-in reference
kernel goes through the real toolchain and device, correct and timed. Skipped elsewhere, with the reason."""

from __future__ import annotations

import os
import shutil
from importlib import resources

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.ascend.glue import torch_npu_root
from kernelsage.tools.results import Candidate, Status


def _missing() -> str:
    if not os.environ.get("ASCEND_HOME_PATH"):
        return "needs CANN: ASCEND_HOME_PATH is not set (source set_env.sh)"
    if not torch_npu_root():
        return "needs torch_npu (pip install -e '.[npu]')"
    if not shutil.which("npu-smi"):
        return "needs an NPU: npu-smi is not on PATH"
    return ""


pytestmark = pytest.mark.skipif(bool(_missing()), reason=_missing() or "ready")


def test_reference_relu_builds_verifies_and_times_on_the_npu(tmp_path) -> None:
    from kernelsage.tools.ascend.backend import AscendBackend

    source = resources.files("kernelsage.tools.ascend").joinpath("examples", "l1_relu.cpp").read_text()
    task = find_task(load_suite("builtin"), "l1_relu")
    with AscendBackend(cache_dir=tmp_path, reps=20) as backend:
        built = backend.compile(Candidate(task_id=task.id, files={"kernel.cpp": source}))
        assert built.ok, built.log
        verified = backend.verify(built.artifact, task)
        assert verified.correct, verified.message
        profiled = backend.profile(built.artifact, task)
        assert profiled.status is Status.OK and profiled.output_correct and profiled.candidate.mean > 0
        assert backend.soc in profiled.message


SUITE_TASKS = ("level2/Foreach/ForeachScaleList", "level2/Norm/AddShiftNorm", "level2/TensorMove/InplaceAxpy")


@pytest.mark.parametrize("task_id", SUITE_TASKS)
def test_a_kernel_only_candidate_runs_through_the_tasks_own_glue(tmp_path, task_id: str) -> None:
    """NPUKernelBench's route on the device: the question's empty kernel (as the kernel-only prompt shows it)
    built with the question's op_host and the task's pybind.cpp, then ModelNew called with a tensor list, an
    absent optional input, several outputs or in place. An empty kernel computes nothing: the verdict must be
    the kernel's (wrong or unwritten outputs), never a build or harness failure."""
    from pathlib import Path

    from kernelsage.tools.ascend.backend import AscendBackend
    from kernelsage.tools.ascend.suite_task import kernel_template_for_prompt, read_suite_task

    fixtures = Path(__file__).resolve().parents[2] / "fixtures" / "npukernelbench"
    task = find_task(load_suite(fixtures), task_id)
    suite = read_suite_task(Path(task.origin.path))
    kernel = kernel_template_for_prompt(suite.question_kernel)
    with AscendBackend(cache_dir=tmp_path) as backend:
        built = backend.compile(Candidate(task_id=task.id, files={suite.kernel_file: kernel}), task=task)
        assert built.ok, built.log
        verified = backend.verify(built.artifact, task)
        assert verified.status in (Status.WRONG_RESULT, Status.PARTIAL_WRITE), verified.message
