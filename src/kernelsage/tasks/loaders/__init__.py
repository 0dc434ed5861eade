"""Load task suites: our own format, KernelBench and MultiKernelBench files, NPUKernelBench folders, each as
its repository lays it out (at the repository root or any folder below)."""

from __future__ import annotations

import os
from pathlib import Path

from kernelsage.errors import TaskLoadError, UnknownTaskError
from kernelsage.tasks.loaders.common import LoadProblem, LoadReport
from kernelsage.tasks.loaders.kernelbench import load_kernelbench_dir, load_kernelbench_file
from kernelsage.tasks.loaders.npukernelbench import load_npu_dir, load_npu_task
from kernelsage.tasks.loaders.suite import load_suite_dir, load_suite_file
from kernelsage.tasks.model import Task, TaskOrigin
from kernelsage.tasks.suites import BUILTIN_SUITE

SHAPE_BUDGET_ENV = "KERNELSAGE_SHAPE_BUDGET"
FORMATS = ("auto", "suite", "kernelbench", "multikernelbench", "npukernelbench")

__all__ = ["FORMATS", "LoadProblem", "LoadReport", "detect_format", "find_task", "load_suite", "load_task"]


def resolve_source(source: str | Path) -> Path:
    """'builtin' names the built-in suite; anything else is a path that must exist."""
    if str(source) == "builtin":
        return BUILTIN_SUITE
    path = Path(source).expanduser()
    if not path.exists():
        raise TaskLoadError(f"{path}: no such file or directory (give a suite path or 'builtin')")
    return path.resolve()  # absolute: the sandbox worker loads tasks again from another directory


# Where each suite's repository keeps its tasks, below its root.
TASK_FOLDERS = {"KernelBench": "kernelbench", "reference": "kernelbench", "tasks": "npukernelbench"}


def suite_root(path: Path) -> Path:
    """The folder that holds the tasks when `path` is a suite repository's root (KernelBench/,
    MultiKernelBench's reference/, NPUKernelBench's tasks/), else `path` itself."""
    if path.is_dir():
        for folder in TASK_FOLDERS:
            if (path / folder).is_dir() and not (path / "validation").is_dir():
                return path / folder
    return path


def detect_format(path: Path) -> str:
    """Guess a suite's format from its files."""
    if path.is_dir():
        if (path / "validation" / "module.py").is_file() or any(path.rglob("validation/module.py")):
            return "npukernelbench"
        files = [p for p in path.rglob("*.py") if not p.name.startswith("_")]
    else:
        files = [path]
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace")
        if "TASKS" in text:
            return "suite"
        if "get_init_inputs" in text:
            return "kernelbench"
    return "suite"


def load_suite(source: str | Path = "builtin", format: str = "auto", *,
               shape_budget: int | str | None = None) -> LoadReport:
    """Load every task of a suite; broken tasks are reported in `problems` and skipped. With a
    `shape_budget` (bytes, or a size such as '64MiB'; default: KERNELSAGE_SHAPE_BUDGET, unset for none), each
    case's shapes are scaled down until its inputs and outputs fit it (`kernelsage.tasks.scaling`)."""
    if format not in FORMATS:
        raise TaskLoadError(f"unknown task format {format!r}; choose one of {', '.join(FORMATS)}")
    budget = shape_budget_bytes(shape_budget)
    root = suite_root(resolve_source(source))
    chosen = detect_format(root) if format == "auto" else format
    loader = {"suite": load_suite_dir, "kernelbench": load_kernelbench_dir, "multikernelbench": load_kernelbench_dir,
              "npukernelbench": load_npu_dir}[chosen]
    report = loader(root)
    if not report.tasks:
        problems = "; ".join(f"{p.path}: {p.message}" for p in report.problems[:3])
        raise TaskLoadError(f"{root}: no task loaded as {chosen}" + (f" ({problems})" if problems else
                                                                    " (no task files found; check --format)"))
    if budget is not None:
        from kernelsage.tasks.scaling import scale_task  # it builds on the loaders' stand-ins

        report.tasks = [scale_task(task, budget) for task in report.tasks]
    return report


def shape_budget_bytes(shape_budget: int | str | None) -> int | None:
    """The budget in bytes: the argument, else KERNELSAGE_SHAPE_BUDGET, else None (no scaling)."""
    from kernelsage.tasks.scaling import parse_bytes

    if shape_budget is None:
        shape_budget = os.environ.get(SHAPE_BUDGET_ENV) or None
    return None if shape_budget is None else parse_bytes(shape_budget)


def load_task(origin: TaskOrigin, task_id: str) -> Task:
    """Load one task again from where it came from (what a worker process does), with the cases its origin
    records when they were scaled to a budget."""
    from kernelsage.tasks.scaling import apply_scaling

    task = _load_task(origin, task_id)
    return apply_scaling(task, origin.scaling) if origin.scaling is not None else task


def _load_task(origin: TaskOrigin, task_id: str) -> Task:
    path, root = Path(origin.path), Path(origin.root)
    if origin.format == "suite":
        for task in load_suite_file(path, root):
            if task.id == task_id:
                return task
        raise UnknownTaskError(f"{path}: defines no task {task_id!r}")
    if origin.format in ("kernelbench", "multikernelbench"):
        return load_kernelbench_file(path, root)
    if origin.format == "npukernelbench":
        return load_npu_task(path, root)
    raise TaskLoadError(f"unknown task format {origin.format!r}")


def find_task(report: LoadReport, task_id: str) -> Task:
    """The task with this id, or an error that lists near names and any load problem that could explain it."""
    task = report.get(task_id)
    if task is not None:
        return task
    near = [t.id for t in report.tasks if task_id.lower() in t.id.lower()][:5]
    hint = f"; did you mean {', '.join(near)}?" if near else f"; {len(report.tasks)} tasks loaded"
    if report.problems:
        hint += f" ({len(report.problems)} task files failed to load)"
    raise UnknownTaskError(f"unknown task {task_id!r}{hint}")
