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
import math
from pathlib import Path
from typing import Any

from kernelsage.errors import TaskLoadError
from kernelsage.tasks.loaders.common import LoadReport, collect, import_file, level_from_path, reference_model
from kernelsage.tasks.loaders.module_task import module_instantiate
from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tasks.model import Task, TaskOrigin, TestCase

DEVICE = "cpu"


def task_folders(root: Path) -> list[Path]:
    """Every folder under root (or root itself) that looks like a task: it has validation/ or api_desc.md."""
    if (root / "validation").is_dir() or (root / "api_desc.md").is_file():
        return [root]
    found = {p.parent for p in root.rglob("api_desc.md")} | {p.parent for p in root.rglob("validation")
                                                            if p.is_dir()}
    return sorted(found)


def _literal(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_test_cases(path: Path) -> list[TestCase]:
    """The rows of a ';'-separated test_cases.csv as test cases."""
    if not path.is_file():
        raise TaskLoadError(f"{path}: missing (each task needs validation/test_cases.csv)")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle, delimiter=";"))
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if len(rows) < 2:
        raise TaskLoadError(f"{path}: needs a header row and at least one case row")
    header = [cell.strip() for cell in rows[0]]
    cases = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise TaskLoadError(f"{path}:{number}: {len(row)} fields, the header has {len(header)}")
        params = {name: _literal(cell) for name, cell in zip(header, row, strict=True)}
        case_id = params.get("case_id", params.get("id", number - 1))
        dtype = params.get("dtype", "float32")
        cases.append(TestCase(name=f"case_{case_id}", params=params,
                              dtype=dtype if isinstance(dtype, str) else "float32"))
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise TaskLoadError(f"{path}: duplicate case ids")
    return cases


def case_size(case: TestCase) -> int:
    """Product of the integers in the case's shape-like values (a proxy for its amount of work)."""
    total = 0
    for value in case.params.values():
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
    relative = folder.relative_to(root) if folder != root else Path(folder.name)
    description = (folder / "api_desc.md").read_text(encoding="utf-8").strip()
    for name in ("module.py", "prepare_inputs.py"):
        description += f"\n\nvalidation/{name}:\n" + (validation / name).read_text(encoding="utf-8")
    perf = max(cases, key=case_size)  # max keeps the first of equals
    return Task(
        id=relative.as_posix(), level=level_from_path(relative.parts),
        category=relative.parent.name or "npukernelbench", description=description,
        cases=tuple(cases), perf_case=perf,
        instantiate=module_instantiate(
            model_class,
            lambda case: prepare.get_inputs(dict(case.params), DEVICE),
            lambda case: prepare.get_init_inputs(dict(case.params), DEVICE),
        ),
        origin=TaskOrigin(format="npukernelbench", root=str(root), path=str(folder)),
    )


def load_npu_dir(root: Path) -> LoadReport:
    return collect(task_folders(root), lambda folder: load_npu_task(folder, root))
