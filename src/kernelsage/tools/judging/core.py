"""What every judge of a sandboxed runner shares: the job's event stream and phases, the runner's limits and
wall-clock budget, the failures that end a job (the candidate's, the harness's, a failed check), and the bytes
of a file the trusted side built, verified before use. The cpu judge (tools/cpu/judge.py) and the triton one
(tools/triton/judge.py) build on JudgeCore; the ascend jobs use the failures and limits."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kernelsage.tools.isolation import Isolation
from kernelsage.tools.judging.arena import Arena
from kernelsage.tools.results import Status

Emit = Callable[[dict[str, Any]], None]


class HarnessFailure(RuntimeError):
    """The task's reference or the harness failed: not the candidate's fault."""

    harness = True


class RunnerFailed(Exception):
    """The candidate's process failed (crashed, hung, broke the protocol): the candidate's result."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class RunnerLimits:
    wall_s: float
    cpu_s: float
    memory_bytes: int  # address space beyond the tensors and the runner's own
    file_bytes: int
    threads: int


class Budget:
    """The candidate's wall-clock allowance, spent by every wait on its process."""

    def __init__(self, seconds: float) -> None:
        self.total = seconds
        self.left = seconds

    def spend(self, seconds: float) -> None:
        self.left -= seconds


class CheckFailed(Exception):
    """A check of a profile call failed: the candidate's result, with its class."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def read_verified(path: str, sha256: str, what: str) -> bytes:
    """The bytes of a file the trusted side built, if they still hash to what was recorded."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise HarnessFailure(f"the {what} {path} cannot be read ({exc}); compile the candidate again") from exc
    if hashlib.sha256(data).hexdigest() != sha256:
        raise HarnessFailure(f"the {what} {path} changed since it was built (sha256 mismatch); compile again")
    return data


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc mallopt parameters


def keep_freed_memory() -> None:
    """Let this (short-lived) process keep the memory it frees: the reference allocates its outputs on every
    timed call, and memory handed back to the system and faulted in again would time page faults, unevenly."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_MAX, 0)
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)


class JudgeCore:
    """What every judge of a sandboxed runner holds: the limits and budget of its job, the phases the worker
    blames by, and the arena and runner it starts and stops (the cpu judge here, the triton one in
    tools/triton/judge.py)."""

    runner: Any

    def __init__(self, payload: dict[str, Any], emit: Emit) -> None:
        self.emit = emit
        self.payload = payload
        self.isolation = Isolation(**payload["isolation"])
        limits = payload["limits"]
        self.limits = RunnerLimits(wall_s=float(limits["wall_s"]), cpu_s=float(limits["cpu_s"]),
                                   memory_bytes=int(limits["memory_bytes"]), file_bytes=int(limits["file_bytes"]),
                                   threads=int(payload["threads"]))
        self.budget = Budget(self.limits.wall_s)
        self.arena: Arena | None = None
        self.runner = None
        self._phase = ""
        self.log_tail = ""
        torch.set_num_threads(self.limits.threads)
        keep_freed_memory()

    def phase(self, name: str) -> None:
        """Tell the worker what runs now: 'candidate' (its time and faults are the candidate's) or the harness's."""
        if name != self._phase:
            self._phase = name
            self.emit({"kind": "phase", "phase": name})

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.log_tail = self.runner.log_tail()
            self.runner = None
        if self.arena is not None:
            self.arena.close()
            self.arena = None
