"""KernelBench-style tasks: one .py file per operator with `Model`, `get_inputs()` and `get_init_inputs()`.

A KernelBench file carries one input configuration, so its task has one test case ("default"), which is
also its performance case; fresh random inputs per trial still vary the values. MultiKernelBench's
NPU-derived files define `get_input_groups()` instead (one group of inputs per line of a JSON file beside
them): each group is a test case, and the first is the performance case, as upstream times it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from kernelsage.errors import TaskLoadError
from kernelsage.tasks.loaders.common import LoadReport, collect, import_file, level_from_path, reference_model
from kernelsage.tasks.loaders.kernelbench_rule import CHECKOUT, kernelbench_rule
from kernelsage.tasks.loaders.module_task import module_instantiate
from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tasks.loaders.tracks import repository_root
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


def load_kernelbench_file(path: Path, root: Path, format: str = "kernelbench", tolerance_rule: str = CHECKOUT) -> Task:
    """One task file; `format` ('kernelbench' or 'multikernelbench') names the suite whose tolerance rule
    judges it, and `tolerance_rule` which of KernelBench's (`kernelbench_rule`)."""
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
    draw_bytes = None
    if callable(groups):
        cases = tuple(TestCase(name=f"group_{i}", params={"group": i}) for i in range(count_groups(groups, path)))
        make_inputs = lambda case: drawn_group(path, groups, case["group"])  # noqa: E731 - all drawn at once
        draw_bytes = declared_group_bytes(path.with_suffix(".json"))
    else:
        cases = (TestCase(name="default", params=size_globals(module)),)
        make_inputs = lambda case: module.get_inputs()  # noqa: E731
    return Task(
        id=task_id_for(path, root), level=suite_level(path, root), category=category,
        description=description, cases=cases, perf_case=cases[0],
        instantiate=module_instantiate(model_class, make_inputs, lambda case: module.get_init_inputs(),
                                       scope=lambda case: module_globals(module, case.params)),
        tolerance_rule=kernelbench_rule(repository_root(path, format), tolerance_rule) if format == "kernelbench"
        else suite_rule(format),
        origin=TaskOrigin(format=format, root=str(root), path=str(path),
                          tolerance_rule=tolerance_rule if format == "kernelbench" else None),
        draw_bytes=draw_bytes,
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


# Element sizes of the dtype names MultiKernelBench's JSON cases use.
_ELEMENT_BYTES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "fp16": 2,
                  "bfloat16": 2, "bf16": 2, "int32": 4, "uint32": 4, "float32": 4, "fp32": 4, "int64": 8,
                  "uint64": 8, "float64": 8, "fp64": 8, "complex64": 8, "complex128": 16}


def declared_group_bytes(cases: Path) -> int | None:
    """The bytes of every input group together, as the JSON file of cases beside a MultiKernelBench file
    declares them (one case per line, its tensor inputs with `dtype` and `shape`): what drawing the groups
    makes. None where there is no such file or a line does not say (an unknown dtype, no shape)."""
    try:
        lines = [line for line in cases.read_text(encoding="utf-8").splitlines() if line.strip()]
        total = 0
        for line in lines:
            for item in json.loads(line)["inputs"]:
                if item.get("type") != "tensor" or item.get("shape") is None:
                    continue
                total += math.prod(int(n) for n in item["shape"]) * _ELEMENT_BYTES[item.get("dtype", "float32")]
        return total
    except (OSError, ValueError, KeyError, TypeError):
        return None


# The last draw of a file's input groups on the CPU: upstream draws every group to build one, so describing or
# checking each case of a task would draw them all again per case. Keyed by the random generators' state, and
# restored to the state after the draw, so a hit gives exactly what drawing again would.
_DRAWN: dict[str, Any] = {}
_DRAWN_LOCK = threading.Lock()
CACHED_DRAW_BYTES = 256 << 20  # larger draws are not kept


def drawn_group(path: Path, groups: Callable[[], list[Any]], index: int) -> list[Any]:
    """Input group `index` of the file, drawn as upstream draws it (all groups at once), its tensors fresh
    copies of the last identical CPU draw where there was one."""
    if torch.get_default_device().type != "cpu":  # the meta device: shapes only, nothing worth keeping
        return groups()[index]
    key = (str(path), _rng_fingerprint())
    with _DRAWN_LOCK:
        hit = _DRAWN.get("key") == key
        drawn, after = (_DRAWN["groups"], _DRAWN["after"]) if hit else (None, None)
    if drawn is None:
        drawn = groups()
        after = _rng_states()
        size = sum(t.nbytes for group in drawn for t in group if isinstance(t, torch.Tensor))
        if size <= CACHED_DRAW_BYTES:
            with _DRAWN_LOCK:
                _DRAWN.update(key=key, groups=drawn, after=after)
    else:
        _set_rng_states(after)
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in drawn[index]]


def _rng_states() -> tuple[Any, ...]:
    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def _set_rng_states(states: tuple[Any, ...]) -> None:
    torch.set_rng_state(states[0])
    np.random.set_state(states[1])
    random.setstate(states[2])


def _rng_fingerprint() -> str:
    torch_state, numpy_state, python_state = _rng_states()
    digest = hashlib.sha256(torch_state.numpy().tobytes())
    digest.update(numpy_state[1].tobytes() + repr(numpy_state[2:]).encode() + repr(python_state).encode())
    return digest.hexdigest()


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


def load_kernelbench_dir(root: Path, format: str = "kernelbench", task_ids: Collection[str] | None = None,
                        tolerance_rule: str = CHECKOUT) -> LoadReport:
    """Every task file below `root`, or only those of `task_ids` (the others are not even imported)."""
    files = kernelbench_files(root)
    if task_ids is not None:
        files = [path for path in files if task_id_for(path, root) in task_ids]
    return collect(files, lambda path: load_kernelbench_file(path, root, format, tolerance_rule),
                   lambda path: (task_id_for(path, root), suite_level(path, root)))
