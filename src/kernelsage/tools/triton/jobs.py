"""What a worker's child does for the triton backend: verify, and profile on a GPU or NPU; on `npu-frontend`,
the compile through triton-ascend's front end. The child is the trusted judge; the candidate runs in the
sandboxed Python process it starts. `prepare` (the task, loaded in the worker and cached) is the shared one (`tools.judging.tasks`).
"""

from __future__ import annotations

from typing import Any

from kernelsage.tasks.model import Task
from kernelsage.tools.judging.core import Emit
from kernelsage.tools.judging.tasks import prepare_task as prepare
from kernelsage.tools.triton import ascend_frontend, device_profile, judge

__all__ = ["frontend", "prepare", "profile", "verify"]


def verify(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    judge.verify(payload, task, emit)


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    device_profile.profile(payload, task, emit)


def frontend(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    ascend_frontend.run_job(payload, task, emit)
