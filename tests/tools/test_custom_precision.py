"""A suite's own precision rule (NPUKernelBench's custom_check_precision) replaces the element-wise
tolerance in verify and profile: a kernel within the task's bound passes, one outside it fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.diagnostics import describe_mismatches
from kernelsage.tools.evaluator import evaluate_candidate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

GELU = (Path(__file__).resolve().parent / "kernels" / "gelu_tanh_offset.cpp").read_text()


@pytest.mark.parametrize(("offset", "correct"), [("0.005f", True), ("0.5f", False)])
def test_the_tasks_own_precision_rule_decides(cpu_backend, offset: str, correct: bool) -> None:
    # The fixture's rule allows an absolute error of 0.01 (its CSV column): 0.005 is beyond the default 1e-3.
    task = find_task(load_suite(FIXTURES / "npukernelbench"), "level1/Activation/GeluCustom")
    evaluation = evaluate_candidate(cpu_backend, task, {"kernel.cpp": GELU.replace("OFFSET", offset)})
    assert evaluation.correct is correct, evaluation.model_dump_json()[:2000]
    if not correct:
        assert "custom_check_precision" in evaluation.verify.first_failure().message
        text = describe_mismatches(evaluation.verify)
        assert "custom_check_precision" in text and "max abs error 0.5" in text
