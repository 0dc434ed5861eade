"""A suite's own precision rule (NPUKernelBench's custom_check_precision) replaces the element-wise
tolerance in verify and profile: a kernel within the task's bound passes, one outside it fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.diagnostics import describe_mismatches
from kernelsage.tools.evaluator import evaluate_candidate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

GELU = """#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))) + OFFSET;
    }
    return 0;
}
"""


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
