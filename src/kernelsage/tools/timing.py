"""The one timing function: used for the candidate and the reference alike (METHOD §8)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernelsage.tools.results import Timing

DEFAULT_WARMUP = 5
DEFAULT_REPS = 100
# A kernel measured in another run must be this much faster, relative to its run's reference, besides the
# intervals not overlapping: the intervals see the noise within a run, not all of the drift between runs
# (reconstruction; METHOD.md is silent, see docs/timing.md).
MIN_RELATIVE_GAIN = 0.05


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


def has_interval(timing: Timing) -> bool:
    return 0 < timing.ci_low <= timing.ci_high


def clearly_faster(fast: Timing, slow: Timing) -> bool:
    """`fast` beats `slow` beyond the measured noise: its median's interval lies wholly below `slow`'s.

    Use it for two timings taken side by side in one run (a candidate and its reference). Without
    intervals nothing counts as faster.
    """
    return has_interval(fast) and has_interval(slow) and fast.ci_high < slow.ci_low


def clearly_faster_relative(fast: Timing, fast_reference: Timing, slow: Timing, slow_reference: Timing) -> bool:
    """`fast` beats `slow` beyond the noise when each was measured in its own run beside the reference.

    Each time is taken relative to the reference measured interleaved with it in the same run, which
    cancels what changed between the runs (load, clock, cache state); the interval of a ratio is taken
    from the ends of the two intervals, so it is never narrower than either.
    """
    if not all(has_interval(t) for t in (fast, fast_reference, slow, slow_reference)):
        return False
    fast_high = fast.ci_high / fast_reference.ci_low
    slow_low = slow.ci_low / slow_reference.ci_high
    return fast_high < slow_low * (1 - MIN_RELATIVE_GAIN)


# The same kernel, profiled 20 times within 15 minutes on a shared machine, measured 0.88x to 1.92x of its
# reference (docs/timing.md): a later kernel this many times faster than an earlier one, at the ends of their
# intervals that favour the earlier, is faster by more than the machine's drift between runs can make.
BEYOND_DRIFT = 3.0


def faster_beyond_drift(fast: Timing, fast_reference: Timing, slow: Timing, slow_reference: Timing) -> bool:
    """`fast` beats `slow` by at least BEYOND_DRIFT times, each relative to its own run's reference: more than a
    change of the machine between the two runs explains, so no second measurement of `slow` is needed."""
    if not all(has_interval(t) for t in (fast, fast_reference, slow, slow_reference)):
        return False
    return fast.ci_high / fast_reference.ci_low * BEYOND_DRIFT <= slow.ci_low / slow_reference.ci_high


# A kernel whose time, relative to the reference beside it, is this much higher on inputs it has never seen than on
# the others kept something from earlier calls (reconstruction; docs/security.md). Below it, gains go unflagged.
UNSEEN_SLOWDOWN = 1.5
MIN_UNSEEN = 4  # with fewer unseen calls the ranks cannot tell state from chance


NEIGHBOURS = 4  # seen calls whose reference times stand in for an unseen call's own


@dataclass(frozen=True)
class TimedCall:
    """One timed call of a profile: its number in the run, the candidate's and the reference's seconds, and
    whether its inputs were an instance no call had before."""

    number: int
    candidate_s: float
    reference_s: float
    unseen: bool = False


def call_ratios(calls: Sequence[TimedCall], neighbours: int = NEIGHBOURS) -> tuple[list[float], list[float]]:
    """Candidate over reference time per call, seen calls and unseen ones apart (what `slower_on_unseen` reads).

    A seen call is divided by its own reference. An unseen call is divided by the median reference time of the
    `neighbours` seen calls nearest to it in the run: its own reference ran on a freshly made instance, whose
    first use measured 0.7-23x the time of the same operation on the sets' data (a 6-8 ms add + RMS norm took
    5.6-152 ms), in either direction, which flagged honest kernels and could hide a kernel's state. The
    neighbours keep what the per-call ratio was for: load changes cancel (they ran within a few calls of it)."""
    seen = [c for c in calls if not c.unseen]
    ratios: tuple[list[float], list[float]] = ([], [])
    for call in calls:
        if call.unseen and seen:
            near = sorted(seen, key=lambda c: (abs(c.number - call.number), c.number))[:neighbours]
            reference = statistics.median(c.reference_s for c in near)
        else:
            reference = call.reference_s
        ratios[call.unseen].append(call.candidate_s / max(reference, 1e-9))
    return ratios


def slower_on_unseen(seen: Sequence[float], unseen: Sequence[float], *,
                     factor: float = UNSEEN_SLOWDOWN) -> float | None:
    """How much slower a kernel was on never-seen inputs than on the others, when clearly so; else None.

    Each value is one call's candidate time over its reference's (same contents, adjacent in time, so load
    changes cancel). Flagged only when every unseen call is `factor` times slower than the median of the others:
    a kernel that treats all calls alike does that with the probability of one call landing that far up, to the
    power len(unseen). A kernel can move the median only by being fast on most seen calls, and then every unseen
    call, where nothing it kept applies, lies above it by its gain. The figure returned is the ratio of medians.
    """
    if len(unseen) < MIN_UNSEEN or not seen:
        return None
    typical = statistics.median(seen)
    if typical <= 0 or min(unseen) <= factor * typical:
        return None
    return statistics.median(unseen) / typical
