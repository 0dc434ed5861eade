"""The built-in suite: enough operators per level, references that run, seeds that fix the inputs."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from kernelsage.tasks.loaders import load_suite

REPORT = load_suite("builtin")


def test_suite_loads_cleanly_with_enough_operators_per_level():
    assert REPORT.problems == []
    per_level = Counter(task.level for task in REPORT.tasks)
    assert per_level[1] >= 15 and per_level[2] >= 15 and per_level[3] >= 10
    ids = [task.id for task in REPORT.tasks]
    assert len(ids) == len(set(ids))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal tensors, NaN equal to NaN (some cases hold NaN on purpose)."""
    if not a.is_floating_point():
        return torch.equal(a, b)
    return a.shape == b.shape and torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True)


@pytest.mark.parametrize("task", REPORT.tasks, ids=lambda task: task.id)
def test_every_case_runs_and_its_inputs_follow_the_seed(task):
    for case in task.cases:
        instance = task.instantiate(case, 11)
        with torch.inference_mode():
            outputs = instance.reference()
        assert outputs and all(isinstance(o, torch.Tensor) and o.numel() > 0 for o in outputs)
        for output in outputs:
            if output.is_floating_point():
                assert torch.isfinite(output).all(), f"{task.id}/{case.name}: reference is not finite"
        again = task.instantiate(case, 11).inputs
        other = task.instantiate(case, 12).inputs
        assert all(_same(again[name], tensor) for name, tensor in instance.inputs.items())
        assert any(not _same(other[name], tensor) for name, tensor in instance.inputs.items())
    perf_inputs = task.instantiate(task.perf_case, 0).inputs
    smallest = min(sum(t.numel() for t in task.instantiate(c, 0).inputs.values()) for c in task.cases)
    assert sum(t.numel() for t in perf_inputs.values()) > smallest, "the performance case is the larger one"
