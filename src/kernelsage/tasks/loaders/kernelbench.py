"""KernelBench-style tasks: one .py file per operator with `Model`, `get_inputs()` and `get_init_inputs()`.

A KernelBench file carries one input configuration, so its task has one test case ("default"), which is
also its performance case; fresh random inputs per trial still vary the values. MultiKernelBench's
NPU-derived files define `get_input_groups()` instead (one group of inputs per line of a JSON file beside
them): each group is a test case, and the first is the performance case, as upstream times it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelsage.errors import TaskLoadError
from kernelsage.tasks.loaders.common import LoadReport, collect, import_file, level_from_path, reference_model
from kernelsage.tasks.loaders.module_task import module_instantiate
from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tasks.model import Task, TaskOrigin, TestCase
from kernelsage.tasks.tolerance import suite_rule


@contextmanager
def offline_hub() -> Iterator[None]:
    """Level-4 files build Hugging Face models when imported: without the network they must fail at once,
    not retry for minutes. The hub libraries read these switches when they are imported."""
    switches = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    saved = {name: os.environ.get(name) for name in switches}
    os.environ.update({name: value for name, value in switches.items() if saved[name] is None})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)


def kernelbench_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*.py") if not p.name.startswith("_"))


def task_id_for(path: Path, root: Path) -> str:
    if root.is_file():
        return path.stem
    return path.relative_to(root).with_suffix("").as_posix()


def suite_level(path: Path, root: Path) -> int:
    """The N of the nearest `levelN` folder on the task's path, inside the suite or the suite folder itself."""
    return level_from_path(tuple(reversed(path.parent.parts)))


def load_kernelbench_file(path: Path, root: Path, format: str = "kernelbench") -> Task:
    """One task file; `format` ('kernelbench' or 'multikernelbench') names the suite whose tolerance rule
    judges it."""
    with offline_hub(), torch_npu_standin():
        try:
            module = import_file(path)
        except TaskLoadError as exc:
            if "huggingface" in str(exc).lower() or "offline" in str(exc).lower():
                raise TaskLoadError(f"{path}: builds a Hugging Face model, which needs the network "
                                    "(the hub is switched off here)") from exc
            raise
    groups = getattr(module, "get_input_groups", None)
    model_class = reference_model(module, module, module_path=path, inputs_path=path,
                                  factory="get_input_groups" if callable(groups) else "get_inputs")
    relative = path.relative_to(root) if root.is_dir() else Path(path.name)
    parent = relative.parent.name
    category = parent if parent and not parent.lower().startswith("level") else "kernelbench"
    doc = (module.__doc__ or model_class.__doc__ or "").strip()
    description = (f"{doc}\n\n" if doc else "") + f"Reference (PyTorch, {path.name}):\n" + path.read_text()
    if callable(groups):
        cases = tuple(TestCase(name=f"group_{i}", params={"group": i}) for i in range(count_groups(groups, path)))
        make_inputs = lambda case: groups()[case["group"]]  # noqa: E731 - the suite draws every group at once
    else:
        cases = (TestCase(name="default", params=size_globals(module)),)
        make_inputs = lambda case: module.get_inputs()  # noqa: E731
    return Task(
        id=task_id_for(path, root), level=suite_level(path, root), category=category,
        description=description, cases=cases, perf_case=cases[0],
        instantiate=module_instantiate(model_class, make_inputs, lambda case: module.get_init_inputs(),
                                       scope=lambda case: module_globals(module, case.params)),
        tolerance_rule=suite_rule(format),
        origin=TaskOrigin(format=format, root=str(root), path=str(path)),
    )


def _is_size(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, (tuple, list)) and bool(value)
                                      and all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def size_globals(module: ModuleType) -> dict[str, Any]:
    """The module-level sizes the input factories read (`batch_size = 16`, `dim = 16384`, `shape = (4, 8)`):
    the parameters of a KernelBench file's one case, which a shape budget may scale (`tasks.scaling`)."""
    names: list[str] = []
    for function in ("get_inputs", "get_init_inputs"):
        code = getattr(getattr(module, function, None), "__code__", None)
        names += [name for name in (code.co_names if code else ()) if name not in names]
    return {name: module.__dict__[name] for name in names if _is_size(module.__dict__.get(name))}


_GLOBALS_LOCK = threading.RLock()  # one case's sizes at a time in a module's globals


@contextmanager
def module_globals(module: ModuleType, params: Mapping[str, Any]) -> Iterator[None]:
    """The case's sizes set as the module's globals while its code runs (the upstream values otherwise)."""
    changed = {name: value for name, value in params.items()
               if name in module.__dict__ and module.__dict__[name] != value}
    if not changed:
        yield
        return
    with _GLOBALS_LOCK:
        saved = {name: module.__dict__[name] for name in changed}
        module.__dict__.update({name: type(saved[name])(value) if isinstance(value, list) else value
                                for name, value in changed.items()})
        try:
            yield
        finally:
            module.__dict__.update(saved)


def count_groups(groups: Callable[[], list[Any]], path: Path) -> int:
    """How many input groups a file defines, counted without allocating them where possible: on the meta
    device, else from the lines of the JSON file of cases beside it (MultiKernelBench's layout), else by
    drawing them."""
    try:
        with torch.device("meta"):
            return _nonempty(len(groups()), path)
    except TaskLoadError:
        raise
    except Exception:
        pass  # an operator without a meta kernel: count another way
    cases = path.with_suffix(".json")
    if cases.is_file():
        return _nonempty(sum(1 for line in cases.read_text(encoding="utf-8").splitlines() if line.strip()), path)
    try:
        count = len(groups())
    except Exception as exc:
        raise TaskLoadError(f"{path}: get_input_groups() failed: {type(exc).__name__}: {exc}") from exc
    return _nonempty(count, path)


def _nonempty(count: int, path: Path) -> int:
    if count == 0:
        raise TaskLoadError(f"{path}: get_input_groups() returned no groups")
    return count


def load_kernelbench_dir(root: Path, format: str = "kernelbench", task_ids: Collection[str] | None = None) -> LoadReport:
    """Every task file below `root`, or only those of `task_ids` (the others are not even imported)."""
    files = kernelbench_files(root)
    if task_ids is not None:
        files = [path for path in files if task_id_for(path, root) in task_ids]
    return collect(files, lambda path: load_kernelbench_file(path, root, format),
                   lambda path: (task_id_for(path, root), suite_level(path, root)))
