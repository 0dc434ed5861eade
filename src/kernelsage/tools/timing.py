"""The one timing function: used for the candidate and the reference alike (METHOD §8)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

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
    return timing_from_samples(samples, warmup=warmup)


def median_interval(samples: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free ~95% confidence interval of the median, from order statistics.

    Per-call times on a shared machine are skewed and heavy-tailed, so the median's interval is used
    rather than a normal interval of the mean.
    """
    ordered = sorted(samples)
    n = len(ordered)
    half_width = z * math.sqrt(n) / 2
    low = max(math.floor(n / 2 - half_width), 0)
    high = min(math.ceil(n / 2 + half_width), n - 1)
    return ordered[low], ordered[high]


def timing_from_samples(samples: Sequence[float], *, warmup: int) -> Timing:
    """The statistics of timed calls (seconds per call): mean, median and its interval, spread."""
    if not samples:
        raise ValueError("no timed samples")
    mean = statistics.fmean(samples)
    stdev = statistics.stdev(samples) if len(samples) > 1 else 0.0
    low, high = median_interval(samples)
    return Timing(mean=mean, median=statistics.median(samples), cv=stdev / mean if mean > 0 else 0.0,
                  minimum=min(samples), warmup=warmup, reps=len(samples), stdev=stdev, ci_low=low, ci_high=high)
