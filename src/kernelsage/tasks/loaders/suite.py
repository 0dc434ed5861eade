"""Our own suite format: Python files, each defining `TASKS`, a list of tasks built with `define_task`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kernelsage.errors import TaskLoadError
from kernelsage.tasks.loaders.common import LoadProblem, LoadReport, import_file
from kernelsage.tasks.model import Task, TaskOrigin


def suite_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*.py") if not p.name.startswith("_"))


def load_suite_file(path: Path, root: Path) -> list[Task]:
    """The tasks one suite file defines, validated; raises TaskLoadError naming the file and the problem."""
    module = import_file(path)
    tasks = getattr(module, "TASKS", None)
    if not isinstance(tasks, (list, tuple)):
        raise TaskLoadError(f"{path}: defines no TASKS list (a suite file lists its tasks in TASKS)")
    origin = TaskOrigin(format="suite", root=str(root), path=str(path))
    loaded = []
    for position, task in enumerate(tasks):
        if not isinstance(task, Task):
            raise TaskLoadError(f"{path}: TASKS[{position}] is a {type(task).__name__}, not a Task (use define_task)")
        problem = validate_task(task)
        if problem:
            raise TaskLoadError(f"{path}: task {task.id!r}: {problem}")
        loaded.append(dataclasses.replace(task, origin=origin))
    return loaded


def validate_task(task: Task) -> str:
    """Why a task is unusable, or '' when it is fine."""
    if not task.id or not isinstance(task.id, str):
        return "empty id"
    if not isinstance(task.level, int) or task.level < 1:
        return f"level must be a positive integer, got {task.level!r}"
    if not task.cases:
        return "no test cases"
    names = [case.name for case in task.cases]
    if len(set(names)) != len(names):
        return f"duplicate case names in {names}"
    if not task.description.strip():
        return "empty description (say what the operator computes and its interface)"
    return ""


def load_suite_dir(root: Path) -> LoadReport:
    report = LoadReport()
    seen: dict[str, str] = {}
    for path in suite_files(root):
        try:
            tasks = load_suite_file(path, root)
        except TaskLoadError as exc:
            report.problems.append(LoadProblem(str(path), str(exc)))
            continue
        for task in tasks:
            if task.id in seen:
                report.problems.append(LoadProblem(str(path), f"{path}: task id {task.id!r} already defined in "
                                                              f"{seen[task.id]}; skipped"))
                continue
            seen[task.id] = str(path)
            report.tasks.append(task)
    return report
