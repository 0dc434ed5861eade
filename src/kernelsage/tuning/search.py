"""The search's decisions, as pure functions of what was measured (no backend, no clock): which configurations
survive a round, which to try next, how much budget exploring may spend, and whether the winner beats the default.

Each configuration's time is taken relative to the reference timed interleaved with it in the same profile
(which cancels load changes between profiles). A configuration is dropped from a round only when clearly slower
than the round's fastest (`clearly_faster_relative`, docs/timing.md), and replaces the default only when faster
in every paired final round, or clearly faster by the intervals where the budget left no rounds; otherwise they
tie, and a tie keeps the default (docs/tuning.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kernelsage.tools.results import Timing
from kernelsage.tools.timing import MIN_RELATIVE_GAIN, clearly_faster_relative, median_interval
from kernelsage.tuning.space import Config, TuningSpace, neighbours


@dataclass(frozen=True)
class Measurement:
    """One profile of one configuration: its time and the reference's, taken side by side."""

    config: Config
    candidate: Timing
    reference: Timing

    @property
    def relative(self) -> float:
        """The configuration's median time over the reference's (lower is faster)."""
        return self.candidate.median / self.reference.median

    @property
    def relative_interval(self) -> tuple[float, float]:
        """The ends of the relative time that the two medians' intervals allow."""
        return self.candidate.ci_low / self.reference.ci_high, self.candidate.ci_high / self.reference.ci_low


def clearly_beats(fast: Measurement, slow: Measurement) -> bool:
    """`fast` is faster than `slow` beyond the noise of both profiles."""
    return clearly_faster_relative(fast.candidate, fast.reference, slow.candidate, slow.reference)


def ranked(measurements: Iterable[Measurement]) -> list[Measurement]:
    """Fastest first by relative median (a stable sort: among equals, the earlier measured first)."""
    return sorted(measurements, key=lambda m: m.relative)


def survivors(round_: Sequence[Measurement], keep: int, default: Config) -> list[Config]:
    """The configurations that go on from a round, at most `keep` (at least two): the fastest ones, less any
    clearly slower than the fastest, with the default always among them (it is what a winner must beat)."""
    keep = max(keep, 2)
    order = ranked(round_)
    if not order:
        return [default]
    best = order[0]
    kept = [m.config for m in order if m is best or not clearly_beats(best, m)][:keep]
    return kept if default in kept else [*kept[:keep - 1], default]


def next_candidates(space: TuningSpace, measured: Sequence[Measurement], tried: set[Config],
                    parents: int) -> list[Config]:
    """The untried neighbours of the `parents` fastest configurations measured so far, the fastest's first."""
    found: list[Config] = []
    for parent in ranked(measured)[:parents]:
        for config in neighbours(space, parent.config):
            if config not in tried and config not in found:
                found.append(config)
    return found


def halving_cost(finalists: int, final_rounds: int) -> int:
    """Profiles that successive halving of `finalists` configurations takes: each rung of more than two profiles
    all it has and keeps half, rounded up; then the best and the default, `final_rounds` times each."""
    cost, n = 0, finalists
    while n > 2:
        cost += n
        n = math.ceil(n / 2)
    return cost + 2 * final_rounds if finalists >= 2 else 0


def rung_reps(base: int, growth: int, rung: int, per_call_s: float, seconds: float) -> int:
    """Timed calls for halving rung `rung` (0 first): `base` x `growth`^(rung + 1), less where the calls of one
    profile (candidate and reference, `per_call_s` together) would take over `seconds`; never below `base`."""
    wanted = base * growth ** (rung + 1)
    fits = int(seconds / per_call_s) if per_call_s > 0 else wanted
    return max(base, min(wanted, fits))


Round = tuple[Measurement, Measurement]  # (the default, the best), profiled one after the other


def gain(rounds: Sequence[Round]) -> tuple[float, float, float]:
    """How many times faster the best is than the default: (median, low, high). Over several rounds, the median
    of the rounds' ratios of relative medians with its order-statistics interval; from one round, the ratio with
    the ends both relative intervals allow."""
    if len(rounds) == 1:
        default, best = rounds[0]
        default_low, default_high = default.relative_interval
        best_low, best_high = best.relative_interval
        return default.relative / best.relative, default_low / best_high, default_high / best_low
    ratios = [default.relative / best.relative for default, best in rounds]
    low, high = median_interval(ratios)
    return statistics.median(ratios), low, high


def round_agrees(round_: Round) -> bool:
    """The best was at least MIN_RELATIVE_GAIN faster than the default in this round (relative medians)."""
    default, best = round_
    return best.relative <= default.relative * (1 - MIN_RELATIVE_GAIN)


def beats_default(rounds: Sequence[Round], min_rounds: int) -> bool:
    """Whether the best beats the default beyond the noise. With `min_rounds` paired rounds or more: faster by
    MIN_RELATIVE_GAIN in every one (relative medians; a configuration no faster than the default does that with
    probability at most 1/2 per round, so 1/16 in four). With fewer (a short budget): `clearly_beats` in the
    last round. Otherwise a tie, and a tie keeps the default."""
    if not rounds:
        return False
    if len(rounds) >= min_rounds:
        return all(round_agrees(round_) for round_ in rounds)
    default, best = rounds[-1]
    return clearly_beats(best, default)
