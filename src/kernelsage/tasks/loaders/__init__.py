"""Load task suites: our own format, KernelBench and MultiKernelBench files, NPUKernelBench folders, each as
its repository lays it out (at the repository root or any folder below), with the kernel-language tracks
(Triton's among them) that a KernelBench or MultiKernelBench checkout declares (tracks.py)."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from kernelsage.errors import TaskLoadError, UnknownTaskError
from kernelsage.tasks.loaders.common import LoadProblem, LoadReport
from kernelsage.tasks.loaders.kernelbench import (
    kernelbench_files,
    load_kernelbench_dir,
    load_kernelbench_file,
    task_id_for,
)
from kernelsage.tasks.loaders.kernelbench_rule import CHECKOUT, rule_name
from kernelsage.tasks.loaders.npukernelbench import (
    load_npu_dir,
    load_npu_task,
    npu_identity,
    one_case,
    task_folders,
)
from kernelsage.tasks.loaders.suite import load_suite_dir, load_suite_file
from kernelsage.tasks.loaders.tracks import Track, suite_tracks
from kernelsage.tasks.model import Task, TaskOrigin, with_tolerance
from kernelsage.tasks.suites import BUILTIN_SUITE
from kernelsage.tasks.tolerance import Tolerance, run_tolerance

SHAPE_BUDGET_ENV = "KERNELSAGE_SHAPE_BUDGET"
FORMATS = ("auto", "suite", "kernelbench", "multikernelbench", "npukernelbench")

__all__ = ["FORMATS", "LoadProblem", "LoadReport", "Track", "detect_format", "find_task", "load_suite", "load_task"]


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
    """Guess a suite's format from its files, and MultiKernelBench's from its `reference/` folder (its files
    are written as KernelBench's, but the suite judges them by its own tolerance)."""
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
            return kernelbench_family(path)
    return "suite"


def kernelbench_family(path: Path) -> str:
    """'multikernelbench' where the nearest of the two repositories' task folders on the path is
    MultiKernelBench's `reference/`, else 'kernelbench' (its `KernelBench/`, or neither)."""
    for part in reversed(path.parts):
        if part in ("reference", "KernelBench"):
            return "multikernelbench" if part == "reference" else "kernelbench"
    return "kernelbench"


def load_suite(source: str | Path = "builtin", format: str = "auto", *, shape_budget: int | str | None = None,
               tolerance: str | Tolerance | None = None, task_ids: Collection[str] | None = None,
               tolerance_rule: str | None = None) -> LoadReport:
    """Load every task of a suite; broken tasks are reported in `problems` and skipped. With a
    `shape_budget` (bytes, or a size such as '64MiB'; default: KERNELSAGE_SHAPE_BUDGET, unset for none), each
    case's shapes are scaled down until its inputs and outputs fit it (`kernelsage.tasks.scaling`). With a
    `tolerance` ('1e-4' or '1e-4,1e-5'; default: KERNELSAGE_TOLERANCE, unset for the suite's own rule), every
    task is judged by it, which must be no looser than the suite's (`kernelsage.tasks.tolerance`). KernelBench
    judges by the rule its checkout's eval.py sets, or the published one when `tolerance_rule` (default:
    KERNELSAGE_TOLERANCE_RULE) is 'published' (`loaders.kernelbench_rule`).

    `task_ids` loads (and scales) only those tasks: in KernelBench and NPUKernelBench layouts an id is a path,
    so the other files are not even read (scaling a whole suite to check one task takes minutes)."""
    if format not in FORMATS:
        raise TaskLoadError(f"unknown task format {format!r}; choose one of {', '.join(FORMATS)}")
    budget = shape_budget_bytes(shape_budget)
    stricter = run_tolerance(tolerance)
    named_rule = rule_name(tolerance_rule)
    root = suite_root(resolve_source(source))
    chosen = detect_format(root) if format == "auto" else format
    wanted = None if task_ids is None else frozenset(task_ids)
    report = _load(root, chosen, wanted, named_rule)
    report.tracks = suite_tracks(root, chosen)
    if not report.tasks and not (wanted and report.ids):
        problems = "; ".join(f"{p.path}: {p.message}" for p in report.problems[:3])
        raise TaskLoadError(f"{root}: no task loaded as {chosen}" + (f" ({problems})" if problems else
                                                                    " (no task files found; check --format)"))
    if budget is not None:
        from kernelsage.tasks.scaling import scale_task  # it builds on the loaders' stand-ins

        report.tasks = [scale_task(task, budget) for task in report.tasks]
    if stricter is not None:
        report.tasks = [with_tolerance(task, stricter) for task in report.tasks]
    return report


def _load(root: Path, format: str, wanted: frozenset[str] | None, tolerance_rule: str) -> LoadReport:
    """The suite's tasks (those of `wanted` only, where given), with every id the suite has where the ids
    are paths, so that an id not found can be answered with near ones."""
    if format == "suite":
        report = load_suite_dir(root)
        if wanted is not None:
            report.ids = [task.id for task in report.tasks]
            report.tasks = [task for task in report.tasks if task.id in wanted]
        return report
    if format == "npukernelbench":
        report = load_npu_dir(root, wanted)
        report.ids = [npu_identity(folder, root)[0] for folder in task_folders(root)] if wanted is not None else []
        return report
    report = load_kernelbench_dir(root, format, wanted, tolerance_rule)
    report.ids = [task_id_for(path, root) for path in kernelbench_files(root)] if wanted is not None else []
    return report


def shape_budget_bytes(shape_budget: int | str | None) -> int | None:
    """The budget in bytes: the argument, else KERNELSAGE_SHAPE_BUDGET, else None (no scaling)."""
    from kernelsage.tasks.scaling import parse_bytes

    if shape_budget is None:
        shape_budget = os.environ.get(SHAPE_BUDGET_ENV) or None
    return None if shape_budget is None else parse_bytes(shape_budget)


def load_task(origin: TaskOrigin, task_id: str) -> Task:
    """Load one task again from where it came from (what a worker process does), with the cases its origin
    records when they were scaled to a budget, and the stricter tolerance it records, if any."""
    from kernelsage.tasks.scaling import apply_scaling

    task = _load_task(origin, task_id)
    task = apply_scaling(task, origin.scaling) if origin.scaling is not None else task
    return with_tolerance(task, origin.tolerance) if origin.tolerance is not None else task


def _load_task(origin: TaskOrigin, task_id: str) -> Task:
    path, root = Path(origin.path), Path(origin.root)
    if origin.format == "suite":
        for task in load_suite_file(path, root):
            if task.id == task_id:
                return task
        raise UnknownTaskError(f"{path}: defines no task {task_id!r}")
    if origin.format in ("kernelbench", "multikernelbench"):
        return load_kernelbench_file(path, root, origin.format, origin.tolerance_rule or CHECKOUT)
    if origin.format == "npukernelbench":
        task = load_npu_task(path, root)
        return one_case(task, origin.case) if origin.case else task
    raise TaskLoadError(f"unknown task format {origin.format!r}")


def find_task(report: LoadReport, task_id: str) -> Task:
    """The task with this id, or an error that lists near names and any load problem that could explain it."""
    task = report.get(task_id)
    if task is not None:
        return task
    problem = next((p for p in report.problems if p.task_id == task_id), None)
    if problem is not None:  # the task is there but does not load: say why
        raise TaskLoadError(problem.message)
    ids = report.ids or [t.id for t in report.tasks]
    near = [known for known in ids if task_id.lower() in known.lower()][:5]
    hint = f"; did you mean {', '.join(near)}?" if near else f"; the suite has {len(ids)} tasks"
    if report.problems and not report.ids:
        hint += f" ({len(report.problems)} task files failed to load)"
    raise UnknownTaskError(f"unknown task {task_id!r}{hint}")
