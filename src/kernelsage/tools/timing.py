"""The one timing function: used for the candidate and the reference alike (METHOD §8)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from kernelsage.tools.results import Timing

DEFAULT_WARMUP = 5
DEFAULT_REPS = 100


def no_sync() -> None:
    """CPU work is finished when the call returns; accelerators pass their device synchronisation instead."""


def measure(run: Callable[[], object], *, warmup: int = DEFAULT_WARMUP, reps: int = DEFAULT_REPS,
            sync: Callable[[], None] = no_sync) -> Timing:
    """Time `run`: `warmup` untimed calls, then `reps` calls each bracketed by `sync`; seconds per call."""
    if reps < 1:
        raise ValueError("reps must be at least 1")
    for _ in range(warmup):
        run()
    sync()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        sync()
        samples.append(time.perf_counter() - start)
    mean = statistics.fmean(samples)
    stdev = statistics.stdev(samples) if len(samples) > 1 else 0.0
    return Timing(mean=mean, median=statistics.median(samples), cv=stdev / mean if mean > 0 else 0.0,
                  minimum=min(samples), warmup=warmup, reps=reps)
