"""The task of a job, loaded in the sandbox worker before it forks the job's judge (and cached there while the
task's file is unchanged), so each judge starts with it. Every backend's job module offers it as `prepare`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelsage.tasks.loaders import load_task
from kernelsage.tasks.model import Task, TaskOrigin

_TASKS: dict[tuple[str, str, float], Task] = {}


def prepare_task(payload: dict[str, Any]) -> Task | None:
    """The job's task, or None for a job that names none."""
    if "task" not in payload:
        return None
    origin = TaskOrigin(**payload["task"]["origin"])
    # the whole origin: its scaling, tolerance, tolerance rule and case each make another task of one file
    key = (payload["task"]["id"], repr(origin), Path(origin.path).stat().st_mtime)
    if key not in _TASKS:
        _TASKS[key] = load_task(origin, payload["task"]["id"])
    return _TASKS[key]


