"""NPUKernelBench-style task folders.

A task folder holds `api_desc.md` (the operator's description), `validation/module.py` (`Model`),
`validation/prepare_inputs.py` (`get_inputs(param, device)`, `get_init_inputs(param, device)`) and
`validation/test_cases.csv` (';'-separated with a header row). Each CSV row is one test case; its values are
parsed as Python literals where possible (shapes such as `[32, 1024]`) and passed to the input factories
as the dict `param`, with `device="cpu"`. The largest case (by the product of its shape-like values) is the
performance case.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch

from kernelsage.errors import TaskLoadError, UnknownTaskError
from kernelsage.tasks.loaders.common import LoadReport, collect, import_file, level_from_path, reference_model
from kernelsage.tasks.loaders.module_task import module_instantiate
from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tasks.loaders.npukernelbench_config import harness_config
from kernelsage.tasks.model import CustomCheck, Task, TaskOrigin, TestCase
from kernelsage.tasks.tolerance import NPUKERNELBENCH_RULE


def _device() -> str:
    """Where the suite's factories should put tensors: the CPU, or the meta device while an interface is
    worked out (`torch.device("meta")` is then the default; the factories take the device explicitly)."""
    return "meta" if torch.get_default_device().type == "meta" else "cpu"


def task_folders(root: Path) -> list[Path]:
    """Every folder under root (or root itself) that is a task: it has `validation/module.py`. (The
    `question/` and `answer/` folders inside a task hold templates and solutions, not tasks.)"""
    if (root / "validation" / "module.py").is_file():
        return [root]
    return sorted(p.parent.parent for p in root.rglob("validation/module.py")
                  if not {"question", "answer"} & set(p.relative_to(root).parts[:-2]))


_BOOLEANS = {"true": True, "false": False}


def _column(cells: list[str]) -> list[Any]:
    """One CSV column typed as upstream reads it (pandas `read_csv`, then integral floats made ints):
    numbers stay numbers, empty cells are NaN, everything else (shapes such as `[32, 1024]`) stays a string,
    which the suite's own `prepare_inputs.py` parses."""
    present = [cell for cell in cells if cell]
    if present and all(cell.lower() in _BOOLEANS for cell in present) and len(present) == len(cells):
        return [_BOOLEANS[cell.lower()] for cell in cells]
    try:
        numbers = [float(cell) if cell else math.nan for cell in cells]
    except ValueError:
        return [cell if cell else math.nan for cell in cells]
    if len(present) == len(cells) and all(n.is_integer() for n in numbers):
        return [int(n) for n in numbers]
    return numbers


def parse_test_cases(path: Path) -> list[TestCase]:
    """The rows of a ';'-separated test_cases.csv as test cases, with upstream's cell types."""
    if not path.is_file():
        raise TaskLoadError(f"{path}: missing (each task needs validation/test_cases.csv)")
    with path.open(newline="", encoding="utf-8-sig") as handle:  # a byte-order mark is no part of the header
        rows = [row for row in csv.reader(handle, delimiter=";") if any(cell.strip() for cell in row)]
    if len(rows) < 2:
        raise TaskLoadError(f"{path}: needs a header row and at least one case row")
    header = [cell.strip() for cell in rows[0]]
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise TaskLoadError(f"{path}:{number}: {len(row)} fields, the header has {len(header)}")
    columns = [_column([row[i].strip() for row in rows[1:]]) for i in range(len(header))]
    cases = []
    for index in range(len(rows) - 1):
        params = {name: column[index] for name, column in zip(header, columns, strict=True)}
        case_id = params.get("case_id", index)
        dtype = params.get("dtype", "float32")
        cases.append(TestCase(name=f"case_{case_id}", params=params,
                              dtype=dtype if isinstance(dtype, str) else "float32"))
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise TaskLoadError(f"{path}: duplicate case ids")
    return cases


def _shape_like(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None
    return value


def case_size(case: TestCase) -> int:
    """Product of the integers in the case's shape-like values (a proxy for its amount of work)."""
    total = 0
    for raw in case.params.values():
        value = _shape_like(raw)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            total += math.prod(value)
        elif isinstance(value, (list, tuple)):
            total += sum(math.prod(v) for v in value if isinstance(v, (list, tuple))
                         and all(isinstance(x, int) for x in v))
    return total


def load_npu_task(folder: Path, root: Path) -> Task:
    validation = folder / "validation"
    for required in (folder / "api_desc.md", validation / "module.py", validation / "prepare_inputs.py"):
        if not required.is_file():
            raise TaskLoadError(f"{required}: missing (an NPUKernelBench task folder needs it)")
    cases = parse_test_cases(validation / "test_cases.csv")
    with torch_npu_standin():
        module = import_file(validation / "module.py", extra_sys_path=validation)
        prepare = import_file(validation / "prepare_inputs.py", extra_sys_path=validation)
    model_class = reference_model(module, prepare, module_path=validation / "module.py",
                                  inputs_path=validation / "prepare_inputs.py", signature="param, device")
    task_id, level = npu_identity(folder, root)
    description = (folder / "api_desc.md").read_text(encoding="utf-8").strip()
    for name in ("module.py", "prepare_inputs.py"):
        description += f"\n\nvalidation/{name}:\n" + (validation / name).read_text(encoding="utf-8")
    perf = max(cases, key=case_size)  # max keeps the first of equals
    return Task(
        id=task_id, level=level,
        category=npu_category(folder), description=description,
        cases=tuple(cases), perf_case=perf,
        instantiate=module_instantiate(
            model_class,
            lambda case: prepare.get_inputs(dict(case.params), _device()),
            lambda case: prepare.get_init_inputs(dict(case.params), _device()),
        ),
        tolerance_rule=NPUKERNELBENCH_RULE,
        origin=TaskOrigin(format="npukernelbench", root=str(root), path=str(folder)),
        custom_check=_custom_check(prepare),
    )


def _as_returned(outputs: tuple[torch.Tensor, ...]) -> torch.Tensor | list[torch.Tensor]:
    return outputs[0] if len(outputs) == 1 else list(outputs)


def _custom_check(prepare: Any) -> CustomCheck | None:
    """The task's `custom_check_precision(param, outputs, outputs_new) -> (ok, abs_diff, rel_diff)`, called as
    upstream calls it (one output as a tensor, several as a list), or None where the task has none."""
    check = getattr(prepare, "custom_check_precision", None)
    if not callable(check):
        return None

    def passed(case: TestCase, expected: tuple[torch.Tensor, ...], actual: tuple[torch.Tensor, ...]) -> bool:
        with torch_npu_standin():
            return bool(check(dict(case.params), _as_returned(expected), _as_returned(actual))[0])

    return passed


def load_npu_dir(root: Path, task_ids: Collection[str] | None = None) -> LoadReport:
    """Every task folder below `root`, or only those of `task_ids` (the others are not even read). In the
    checkout's static-shape mode each folder is a task per case id below n_case (`static_shape_tasks`); an
    id may then name the folder (all its case tasks) or one case task."""
    folders = task_folders(root)
    if task_ids is not None:
        wanted = {folder_id(task_id) for task_id in task_ids}
        folders = [folder for folder in folders if npu_identity(folder, root)[0] in wanted]
    report = collect(folders, lambda folder: load_npu_task(folder, root), lambda folder: npu_identity(folder, root))
    config = harness_config(root)
    if config.static_shapes:
        report.tasks = [one for task in report.tasks for one in static_shape_tasks(task, config.n_case)]
        if task_ids is not None:
            report.tasks = [task for task in report.tasks if task.id in task_ids or folder_id(task.id) in task_ids]
    return report


def static_shape_tasks(task: Task, n_case: int) -> list[Task]:
    """NPUKernelBench's static-shape mode: the task as one task per case id below `n_case`, each prompted,
    built and judged on its own case (upstream's kernel-only kernels get no shapes from the question's tiling,
    so a kernel is written for one case's shapes)."""
    wanted = {f"case_{number}" for number in range(n_case)}
    return [one_case(task, case.name) for case in task.cases if case.name in wanted]


def one_case(task: Task, case_name: str) -> Task:
    """The task restricted to one of its cases (id `<task id>/<case>`), recorded in its origin so that a worker
    loads the same."""
    case = next((c for c in task.cases if c.name == case_name), None)
    if case is None:
        raise UnknownTaskError(f"task {task.id!r} has no case {case_name!r} (it has "
                               f"{', '.join(c.name for c in task.cases)})")
    origin = dataclasses.replace(task.origin, case=case_name) if task.origin else None
    return dataclasses.replace(task, id=f"{task.id}/{case_name}", cases=(case,), perf_case=case, origin=origin)


def folder_id(task_id: str) -> str:
    """The task folder's id of a task id (a static-shape case task's `<folder id>/case_<n>`)."""
    head, _, last = task_id.rpartition("/")
    return head if head and last.startswith("case_") else task_id


def npu_category(folder: Path) -> str:
    """The folder above the task's (tasks/levelN/<Category>/<Op>), wherever the suite path points."""
    parent = folder.parent.name
    return "npukernelbench" if not parent or level_from_path((parent,), 0) else parent


def npu_identity(folder: Path, root: Path) -> tuple[str, int]:
    """The id and level of the task in `folder`: its path below the suite folder, and the nearest `levelN`
    folder on its whole path (`--suite tasks/level3` or a task folder itself still says level 3)."""
    relative = folder.relative_to(root) if folder != root else Path(folder.name)
    return relative.as_posix(), level_from_path(tuple(reversed(folder.parts)))
