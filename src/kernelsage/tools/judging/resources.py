"""What every backend's jobs get: threads, the wall-clock, CPU and memory limits of verify and profile, and the
directory builds are cached under."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import platformdirs

from kernelsage.errors import BackendError
from kernelsage.tools.sandbox import Limits


def default_threads() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


MEMORY_LIMIT_ENV = "KERNELSAGE_CPU_MEMORY_MB"
TIME_LIMIT_ENV = "KERNELSAGE_CPU_TIME_LIMIT_S"
DEFAULT_RUN_LIMITS = Limits(wall_s=60, cpu_s=120)


def run_limits_for(memory_limit_mb: int | None, time_limit_s: float | None) -> Limits:
    """Verify and profile limits from the two settings a user gives: `memory_limit_mb` bounds both the
    judge (references, inputs, outputs) and the kernel beyond its tensors; `time_limit_s` is the job's wall
    clock for the kernel's work, with twice that in CPU time (threads) and at least as long for the judge's
    own work (references of large cases take as long). Unset settings keep DEFAULT_RUN_LIMITS."""
    limits = DEFAULT_RUN_LIMITS
    if memory_limit_mb is not None:
        if memory_limit_mb < 64:
            raise BackendError(f"memory limit {memory_limit_mb} MiB: give at least 64 MiB")
        limits = dataclasses.replace(limits, memory_bytes=memory_limit_mb << 20,
                                     harness_memory_bytes=memory_limit_mb << 20)
    if time_limit_s is not None:
        if time_limit_s <= 0:
            raise BackendError(f"time limit {time_limit_s} s: give a positive number of seconds")
        limits = dataclasses.replace(limits, wall_s=float(time_limit_s), cpu_s=2.0 * time_limit_s,
                                     harness_wall_s=max(limits.harness_wall_s, float(time_limit_s)))
    return limits


def cache_root() -> Path:
    """$KERNELSAGE_CACHE, else the per-user cache directory."""
    configured = os.environ.get("KERNELSAGE_CACHE")
    base = Path(configured).expanduser() if configured else Path(platformdirs.user_cache_dir("kernelsage"))
    return base / "cpu-builds"
