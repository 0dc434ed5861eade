"""The arguments NPUKernelBench's harness passes to `ModelNew(*get_init_inputs(row))(*get_inputs(row))`, made
by the judge for one instance: the same values the task's instance holds (the same seed, the same calls in the
same order as `kernelsage.tasks.loaders.module_task`), kept in their structure (tensor lists, None for an
absent optional input, scalars), so the candidate's run calls the task's own `ModelNew` as upstream does
(`framework/batch_precision_eval.py` lines 89-110; upstream makes them on the NPU, the judge on the CPU)."""

from __future__ import annotations

import functools
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernelsage.tasks.loaders.common import import_file
from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tasks.model import CaseInstance, Task, TestCase
from kernelsage.tools.judging.core import HarnessFailure

PORTABLE = (type(None), bool, int, float, str)  # what crosses to the run besides tensors, lists and tuples


@functools.lru_cache(maxsize=16)
def _task_modules(folder: str) -> tuple[Any, Any]:
    validation = Path(folder) / "validation"
    with torch_npu_standin():
        module = import_file(validation / "module.py", extra_sys_path=validation)
        prepare = import_file(validation / "prepare_inputs.py", extra_sys_path=validation)
    return module, prepare


def portable(value: Any, where: str) -> Any:
    """`value` as the run's request carries it (tensors contiguous, numpy scalars as Python numbers)."""
    if isinstance(value, torch.Tensor):
        return value.detach().contiguous().clone()
    if isinstance(value, (list, tuple)):
        items = [portable(item, f"{where}[{i}]") for i, item in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, PORTABLE):
        return value
    raise HarnessFailure(f"{where} is a {type(value).__name__}, which the device run cannot be handed")


def tensors_of(value: Any) -> list[torch.Tensor]:
    """The tensors of a nested argument structure, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_of(item)]
    return []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a, b) or (a.is_floating_point() and bool(torch.isclose(a, b, 0, 0, equal_nan=True).all()))


def suite_arguments(task: Task, case: TestCase, seed: int, instance: CaseInstance) -> tuple[list[Any], list[Any]]:
    """(init arguments, forward arguments) of one instance, checked to hold exactly the instance's forward
    inputs (`instance` before its reference ran: an in-place reference changes them)."""
    if task.origin is None:
        raise HarnessFailure(f"task {task.id!r} has no folder to call its ModelNew from")
    module, prepare = _task_modules(task.origin.path)
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    with torch_npu_standin():
        init = list(prepare.get_init_inputs(dict(case.params), "cpu"))
        module.Model(*init)  # built as the instance's model was, so the generators stand where they stood
        forward = list(prepare.get_inputs(dict(case.params), "cpu"))
    init_args, forward_args = portable(init, "get_init_inputs()"), portable(forward, "get_inputs()")
    mine = tensors_of(forward_args)
    theirs = [t for name, t in instance.inputs.items() if not name.startswith(("param.", "buffer."))]
    if len(mine) != len(theirs) or not all(_same(a, b) for a, b in zip(mine, theirs, strict=False)):
        raise HarnessFailure(f"case {case.name!r}: the inputs made for ModelNew differ from the instance's "
                             "(the task's input factory is not reproducible under a seed)")
    return init_args, forward_args
