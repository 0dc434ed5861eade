"""Metrics of a stream run (METHOD §9), computed from episode records by pure functions.

Conventions shared by every function here:

- An operator is a task id. When a task id appears more than once in a run, the last record in list
  order wins (the runner appends, so a re-run episode supersedes the earlier one); all metrics,
  including CR and Acc, are computed on these deduplicated records.
- Acc (not defined in METHOD) is correct candidates / candidates generated, pooled over operators.
- A speedup is measured only from positive, finite latencies; a zero, negative or missing latency
  leaves the operator without a speedup (never a division by zero). The stored ratio is used only
  when the latencies were not recorded.
- Fast1.0 keeps every solved operator in its denominator: one without a measured speedup cannot be
  shown to beat the reference. "Beats" is strict (a speedup of exactly 1.0 does not).
- Records without a level count in the overall figures only.
- Medians of ratios (speedups) are taken on a log scale: with an even count the median is the geometric
  mean of the middle two values (any value between them is a median; this one treats "2x faster" and
  "2x slower" alike, so the median of x and 1/x is 1). Every median keeps the range it summarises.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelsage.evals.records import EpisodeRecord

DEFAULT_FAST_P: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class Ratio:
    """A proportion that keeps its counts; undefined (None) when the total is zero."""

    n: int
    total: int

    @property
    def value(self) -> float | None:
        return self.n / self.total if self.total else None

    def __str__(self) -> str:
        value = self.value
        shown = "n/a" if value is None else f"{100 * value:.1f}%"
        return f"{shown} ({self.n}/{self.total})"

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "total": self.total, "value": self.value}


@dataclass(frozen=True)
class SampleStat:
    """A statistic (median, mean, ...) of n values, with the smallest and largest of them; None when
    there were none."""

    value: float | None
    n: int
    low: float | None = field(default=None, compare=False)
    high: float | None = field(default=None, compare=False)

    def format(self, suffix: str = "", digits: int = 2) -> str:
        shown = "n/a" if self.value is None else f"{self.value:.{digits}f}{suffix}"
        if self.n > 1 and self.low is not None and self.high is not None and self.low != self.high:
            return f"{shown} (n={self.n}, {self.low:.{digits}f}{suffix} to {self.high:.{digits}f}{suffix})"
        return f"{shown} (n={self.n})"

    def __str__(self) -> str:
        return self.format()

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "n": self.n, "min": self.low, "max": self.high}


@dataclass(frozen=True)
class TimeSpread:
    """A latency as its median with the ~95% interval of that median (seconds per run)."""

    median: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Metrics:
    """Every metric of one group of operators (a whole run or one level)."""

    operators: int
    er: Ratio
    cr: Ratio
    acc: Ratio
    fast1: Ratio
    s_self_median: SampleStat
    speedup_median: SampleStat
    speedup_geomean: SampleStat
    fast_p: dict[float, Ratio]
    mean_first_correct_round: SampleStat
    adoption: Ratio
    mean_terminal_score: SampleStat
    # Every round by its status: the backend's verdicts and the rounds that produced nothing to evaluate
    # (parse_error, truncated, adoption_unresolved, model_error), so CR's denominator is never the whole story.
    round_statuses: dict[str, int] = field(default_factory=dict)
    failed_episodes: int = 0  # episodes that stopped before their budget (EpisodeRecord.failure)

    @property
    def rounds(self) -> int:
        return sum(self.round_statuses.values())

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"operators": self.operators}
        for name in ("er", "cr", "acc", "fast1", "s_self_median", "speedup_median", "speedup_geomean",
                     "mean_first_correct_round", "adoption", "mean_terminal_score"):
            data[name] = getattr(self, name).to_dict()
        data["fast_p"] = {p_key(p): ratio.to_dict() for p, ratio in self.fast_p.items()}
        data["rounds"] = self.rounds
        data["round_statuses"] = dict(self.round_statuses)
        data["failed_episodes"] = self.failed_episodes
        return data


@dataclass(frozen=True)
class Summary:
    """A run's metrics overall and per level; `superseded` counts records dropped as duplicates."""

    overall: Metrics
    by_level: dict[int, Metrics]
    episodes: int
    superseded: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "superseded": self.superseded,
            "overall": self.overall.to_dict(),
            "by_level": {str(level): metrics.to_dict() for level, metrics in self.by_level.items()},
        }


@dataclass(frozen=True)
class ComparisonRow:
    """One policy's line in a side-by-side comparison."""

    policy: str
    summary: Summary
    task_ids: frozenset[str] = field(default_factory=frozenset)

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, **self.summary.to_dict()}


def deduplicate(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """One record per task id (the last one wins), in stream order (by position)."""
    latest: dict[str, EpisodeRecord] = {}
    for record in records:
        latest.pop(record.task_id, None)  # re-insert so dict order follows the winning record
        latest[record.task_id] = record
    return sorted(latest.values(), key=lambda record: record.position)


def measured_speedup(record: EpisodeRecord) -> float | None:
    """T_reference / T_best of a solved operator as credited (1.0 where the measured noise hides the
    difference, see docs/timing.md), or None when it was not (validly) measured."""
    if not record.solved:
        return None
    if _is_positive(record.speedup):
        return record.speedup
    return _latency_ratio(record.t_reference, record.t_best, None)


def measured_self_speedup(record: EpisodeRecord) -> float | None:
    """T_first / T_best of a solved operator, or None when it was not (validly) measured."""
    return _latency_ratio(record.t_first, record.t_best, record.self_speedup) if record.solved else None


def metrics_of(records: Sequence[EpisodeRecord], fast_p: Sequence[float] = DEFAULT_FAST_P) -> Metrics:
    """The metrics of deduplicated records (see `deduplicate`)."""
    solved = [record for record in records if record.solved]
    speedups = [s for s in map(measured_speedup, solved) if s is not None]
    self_speedups = [s for s in map(measured_self_speedup, solved) if s is not None]
    first_rounds = [r.first_correct_round for r in solved if r.first_correct_round is not None]
    scores = [r.memory.terminal_score for r in records if r.memory.terminal_score is not None]
    exposures = [exposure for record in records for exposure in record.adoption]
    return Metrics(
        operators=len(records),
        er=Ratio(len(solved), len(records)),
        cr=Ratio(sum(r.compiled for r in records), sum(r.candidates for r in records)),
        acc=Ratio(sum(r.correct_candidates for r in records), sum(r.candidates for r in records)),
        fast1=Ratio(sum(s > 1.0 for s in speedups), len(solved)),
        s_self_median=ratio_median(self_speedups),
        speedup_median=ratio_median(speedups),
        speedup_geomean=_geomean(speedups),
        fast_p={p: Ratio(sum(s > p for s in speedups), len(records)) for p in fast_p},
        mean_first_correct_round=_mean(first_rounds),
        adoption=Ratio(sum(exposure.adopted for exposure in exposures), len(exposures)),
        mean_terminal_score=_mean(scores),
        round_statuses=dict(Counter(attempt.status for record in records for attempt in record.attempts)),
        failed_episodes=sum(1 for record in records if record.failure),
    )


def summarize(records: Iterable[EpisodeRecord], fast_p: Sequence[float] = DEFAULT_FAST_P) -> Summary:
    """One run's metrics, overall and per level, after deduplicating task ids."""
    records = list(records)
    unique = deduplicate(records)
    levels = sorted({record.level for record in unique if record.level is not None})
    return Summary(
        overall=metrics_of(unique, fast_p),
        by_level={level: metrics_of([r for r in unique if r.level == level], fast_p) for level in levels},
        episodes=len(records),
        superseded=len(records) - len(unique),
    )


def compare(
    records_by_policy: Mapping[str, Iterable[EpisodeRecord]], fast_p: Sequence[float] = DEFAULT_FAST_P
) -> list[ComparisonRow]:
    """One row per policy, in the mapping's order."""
    rows = []
    for policy, records in records_by_policy.items():
        records = list(records)
        task_ids = frozenset(record.task_id for record in records)
        rows.append(ComparisonRow(policy, summarize(records, fast_p), task_ids))
    return rows


def cumulative_er(records: Iterable[EpisodeRecord]) -> list[float]:
    """ER of the first k operators of the stream, for k = 1..N (deduplicated, in position order)."""
    values, solved = [], 0
    for count, record in enumerate(deduplicate(records), start=1):
        solved += record.solved
        values.append(solved / count)
    return values


def cumulative_adoption_rate(records: Iterable[EpisodeRecord]) -> list[float | None]:
    """Adopted / shown items over the first k operators, k = 1..N; None until something was shown."""
    values: list[float | None] = []
    adopted = shown = 0
    for record in deduplicate(records):
        shown += len(record.adoption)
        adopted += sum(exposure.adopted for exposure in record.adoption)
        values.append(adopted / shown if shown else None)
    return values


def _latency_ratio(numerator: float | None, denominator: float | None, stored: float | None) -> float | None:
    if numerator is None or denominator is None:
        return stored if _is_positive(stored) else None
    return numerator / denominator if _is_positive(numerator) and _is_positive(denominator) else None


def _is_positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def ratio_median(values: Sequence[float]) -> SampleStat:
    """The median of positive ratios on a log scale (see the module's conventions), with their range."""
    if not values:
        return SampleStat(None, 0)
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        median = ordered[middle]
    else:  # the geometric mean of the middle two, clamped against rounding
        low, high = ordered[middle - 1], ordered[middle]
        median = min(high, max(low, math.sqrt(low * high)))
    return SampleStat(median, len(ordered), ordered[0], ordered[-1])


def _mean(values: Sequence[float]) -> SampleStat:
    if not values:
        return SampleStat(None, 0)
    return SampleStat(statistics.fmean(values), len(values), min(values), max(values))


def _geomean(values: Sequence[float]) -> SampleStat:
    # Through logs: a product of many speedups can overflow.
    if not values:
        return SampleStat(None, 0)
    geomean = math.exp(statistics.fmean(math.log(v) for v in values))
    # Rounding in exp/log may step just outside [min, max], which no mean can.
    return SampleStat(min(max(values), max(min(values), geomean)), len(values), min(values), max(values))


def time_spread(timing: Any) -> TimeSpread | None:
    """A `Timing`'s median with the interval of that median; None when it was not measured."""
    if timing is None or not _is_positive(timing.median):
        return None
    low = timing.ci_low if _is_positive(timing.ci_low) else timing.median
    high = timing.ci_high if _is_positive(timing.ci_high) else timing.median
    return TimeSpread(timing.median, min(low, timing.median), max(high, timing.median))


def median_speedup(reference: TimeSpread, candidate: TimeSpread) -> TimeSpread:
    """T_reference / T_candidate from the two medians, with the widest interval their intervals allow."""
    return TimeSpread(reference.median / candidate.median, reference.low / candidate.high,
                      reference.high / candidate.low)


def attempt_times(record: EpisodeRecord) -> dict[str, TimeSpread | None]:
    """The medians (with intervals) behind T_first, T_best and T_reference of a record: the first correct
    attempt's and the best attempt's profiles (the best is the correct attempt whose mean is T_best)."""
    correct = [a for a in record.attempts if a.correct and a.evaluation is not None and a.evaluation.profile]
    first = next((a for a in correct if a.round == record.first_correct_round), correct[0] if correct else None)
    best = next((a for a in correct if a.latency == record.t_best), first)

    def spread(attempt: Any, which: str) -> TimeSpread | None:
        return time_spread(getattr(attempt.evaluation.profile, which)) if attempt is not None else None

    return {"first": spread(first, "candidate"), "best": spread(best, "candidate"),
            "reference": spread(best, "reference")}


def p_key(p: float) -> str:
    """The threshold as written in labels and JSON keys: 1.0 -> "1.0", 1.25 -> "1.25"."""
    text = f"{p:g}"
    return text if any(mark in text for mark in ".en") else f"{text}.0"
