"""Load task suites: our own format, KernelBench-style files, NPUKernelBench-style folders."""

from __future__ import annotations

from pathlib import Path

from kernelsage.errors import TaskLoadError, UnknownTaskError
from kernelsage.tasks.loaders.common import LoadProblem, LoadReport
from kernelsage.tasks.loaders.kernelbench import load_kernelbench_dir, load_kernelbench_file
from kernelsage.tasks.loaders.npukernelbench import load_npu_dir, load_npu_task
from kernelsage.tasks.loaders.suite import load_suite_dir, load_suite_file
from kernelsage.tasks.model import Task, TaskOrigin
from kernelsage.tasks.suites import BUILTIN_SUITE

FORMATS = ("auto", "suite", "kernelbench", "npukernelbench")

__all__ = ["FORMATS", "LoadProblem", "LoadReport", "detect_format", "find_task", "load_suite", "load_task"]


def resolve_source(source: str | Path) -> Path:
    """'builtin' names the built-in suite; anything else is a path that must exist."""
    if str(source) == "builtin":
        return BUILTIN_SUITE
    path = Path(source).expanduser()
    if not path.exists():
        raise TaskLoadError(f"{path}: no such file or directory (give a suite path or 'builtin')")
    return path.resolve()  # absolute: the sandbox worker loads tasks again from another directory


def detect_format(path: Path) -> str:
    """Guess a suite's format from its files."""
    if path.is_dir():
        if (path / "api_desc.md").is_file() or any(path.rglob("api_desc.md")) \
                or any(p.is_dir() for p in path.rglob("validation")):
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


def load_suite(source: str | Path = "builtin", format: str = "auto") -> LoadReport:
    """Load every task of a suite; broken tasks are reported in `problems` and skipped."""
    if format not in FORMATS:
        raise TaskLoadError(f"unknown task format {format!r}; choose one of {', '.join(FORMATS)}")
    root = resolve_source(source)
    chosen = detect_format(root) if format == "auto" else format
    loader = {"suite": load_suite_dir, "kernelbench": load_kernelbench_dir, "npukernelbench": load_npu_dir}[chosen]
    return loader(root)


def load_task(origin: TaskOrigin, task_id: str) -> Task:
    """Load one task again from where it came from (what a worker process does)."""
    path, root = Path(origin.path), Path(origin.root)
    if origin.format == "suite":
        for task in load_suite_file(path, root):
            if task.id == task_id:
                return task
        raise UnknownTaskError(f"{path}: defines no task {task_id!r}")
    if origin.format == "kernelbench":
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
