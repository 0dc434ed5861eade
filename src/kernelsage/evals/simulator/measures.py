"""What a simulated stream measured, and intervals over seeds. Pure functions of stream results.

ER, Fast1.0 and S_self come from evals.metrics (each simulated episode is one operator record). The
others need the ground truth only a simulator has: credit accuracy (rank correlation of learned score
with true value), hot-memory precision, and how fast harmful items lose their utility.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernelsage.evals.metrics import metrics_of
from kernelsage.evals.simulator.run import StreamResult
from kernelsage.evals.simulator.truth import HARMFUL, HELPFUL
from kernelsage.memory_backend.policies import get_policy

MIN_EXPOSURES = 3  # items shown fewer times are left out of credit accuracy: too little evidence
# Two-sided 95% Student-t quantiles by degrees of freedom (1..30); the normal 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
MEASURES = ("er", "level3_er", "fast1", "s_self", "s_self_mean", "credit_accuracy", "hot_precision", "hot_value",
            "memory_tokens", "harmful_shown", "harmful_demoted", "exposures_to_demote", "helpful_demoted", "items")

SHARES = ("er", "level3_er", "fast1", "hot_precision", "harmful_shown", "harmful_demoted", "helpful_demoted")
BOUNDS = {**dict.fromkeys(SHARES, (0.0, 1.0)), "credit_accuracy": (-1.0, 1.0)}  # intervals are clipped to these


def ranks(values: Sequence[float]) -> np.ndarray:
    """Ranks from 1, ties sharing their mean rank."""
    array = np.asarray(values, dtype=float)
    order = np.argsort(array, kind="mergesort")
    ranked = np.empty(len(array))
    sorted_values = array[order]
    start = 0
    while start < len(array):
        end = start
        while end + 1 < len(array) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranked[order[start: end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranked


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation; None with fewer than 3 pairs or when either side is constant."""
    if len(x) != len(y) or len(x) < 3:
        return None
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def credit_accuracy(result: StreamResult, min_exposures: int = MIN_EXPOSURES) -> float | None:
    """Rank correlation of each item's learned score with its true value where it was shown, over items
    shown at least `min_exposures` times; None for policies that learn nothing."""
    pairs = [(score, result.truth.true_value(item)) for item, score in result.learned.items()
             if result.truth.exposures.get(item, 0) >= min_exposures]
    return spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else None


def hot_precision(result: StreamResult) -> float | None:
    """Share of the resident rules at the end that are helpful: true value (over the stream's operators)
    above HELPFUL (0.05)."""
    if not result.hot_values:
        return None
    return sum(v > HELPFUL for v in result.hot_values) / len(result.hot_values)


def demotion(result: StreamResult) -> dict[str, float | None]:
    """How fast stored utility turns negative: for harmful and for helpful items (true value beyond
    +-0.05, shown at least once), the share whose utility fell below 0, and the median number of episodes
    that showed a harmful item until it did. None for policies without utility learning."""
    if get_policy(result.spec.policy).learning != "credit":
        return {"harmful_demoted": None, "exposures_to_demote": None, "helpful_demoted": None}
    shown = [item for item, n in result.truth.exposures.items() if n > 0]
    harmful = [i for i in shown if result.truth.true_value(i) < HARMFUL]
    helpful = [i for i in shown if result.truth.true_value(i) > HELPFUL]
    demoted = [result.truth.first_negative[i] for i in harmful if i in result.truth.first_negative]
    return {
        "harmful_demoted": len(demoted) / len(harmful) if harmful else None,
        "exposures_to_demote": float(statistics.median(demoted)) if demoted else None,
        "helpful_demoted": sum(i in result.truth.first_negative for i in helpful) / len(helpful) if helpful else None,
    }


def harmful_shown(result: StreamResult) -> float | None:
    """Share of the items shown in the second half of the stream that were harmful where they were shown
    (how well the memory keeps harmful items away once it has had time to learn)."""
    late = result.truth.harmful_shown[len(result.truth.harmful_shown) // 2:]
    shown = sum(n for n, _ in late)
    return sum(h for _, h in late) / shown if shown else None


def stream_measures(result: StreamResult) -> dict[str, float | None]:
    """Every measure of one stream (see MEASURES and docs/simulator.md)."""
    metrics = metrics_of(result.records)
    level3 = [r for r in result.records if r.level == 3]
    solved = [r.self_speedup for r in result.records if r.solved and r.self_speedup]
    hot = result.hot_values
    return {
        "er": metrics.er.value,
        "level3_er": metrics_of(level3).er.value if level3 else None,
        "fast1": metrics.fast1.value,
        "s_self": metrics.s_self_median.value,
        "s_self_mean": statistics.fmean(solved) if solved else None,
        "credit_accuracy": credit_accuracy(result),
        "hot_precision": hot_precision(result),
        "hot_value": statistics.fmean(hot) if hot else None,
        "memory_tokens": statistics.fmean(result.truth.memory_tokens) if result.truth.memory_tokens else 0.0,
        "harmful_shown": harmful_shown(result),
        **demotion(result),
        "items": float(result.truth.items),
    }


def t95(freedom: int) -> float:
    """The two-sided 95% Student-t quantile: the table up to 30 degrees of freedom, then the
    Cornish-Fisher expansion around 1.96 (within 0.001 there), so the interval narrows smoothly."""
    if freedom <= len(_T95):
        return _T95[freedom - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * freedom) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * freedom**2)


def interval(values: Sequence[float | None], bounds: tuple[float, float] | None = None) -> dict[str, Any]:
    """Mean and 95% Student-t interval over seeds of the defined values (all None when none is defined;
    low and high None from a single value, which has no spread to estimate), clipped to the measure's
    `bounds`, with every seed's value (None where undefined) for paired comparisons."""
    defined = [v for v in values if v is not None and math.isfinite(v)]
    per_seed = list(values)
    if not defined:
        return {"mean": None, "low": None, "high": None, "n": 0, "values": per_seed}
    mean = statistics.fmean(defined)
    if len(defined) == 1:
        return {"mean": mean, "low": None, "high": None, "n": 1, "values": per_seed}
    half = t95(len(defined) - 1) * statistics.stdev(defined) / math.sqrt(len(defined))
    low, high = bounds or (-math.inf, math.inf)
    return {"mean": mean, "low": max(low, mean - half), "high": min(high, mean + half), "n": len(defined),
            "values": per_seed}


def summarise_seeds(per_seed: Sequence[dict[str, float | None]]) -> dict[str, dict[str, Any]]:
    """Each measure's mean and interval over seeds."""
    return {name: interval([m.get(name) for m in per_seed], BOUNDS.get(name)) for name in MEASURES}


def learning_curve(result: StreamResult, windows: int = 20) -> list[tuple[int, float]]:
    """ER in consecutive windows of the stream: (last episode of the window, share solved)."""
    solved = np.array([r.solved for r in result.records], dtype=float)
    edges = np.linspace(0, len(solved), min(windows, len(solved)) + 1).astype(int)
    return [(int(hi), float(solved[lo:hi].mean())) for lo, hi in itertools.pairwise(edges) if hi > lo]


def latency_table(latencies: Sequence[tuple[int, str, float]], buckets: int = 10) -> list[dict[str, Any]]:
    """Latency percentiles (ms) of each phase in consecutive stretches of the stream, with the memory's
    size at the end of each stretch."""
    rows = []
    by_phase: dict[str, list[tuple[int, float]]] = {}
    for items, phase, ms in latencies:
        by_phase.setdefault(phase, []).append((items, ms))
    for phase, samples in by_phase.items():
        edges = np.linspace(0, len(samples), min(buckets, len(samples)) + 1).astype(int)
        for lo, hi in itertools.pairwise(edges):
            if hi <= lo:
                continue
            times = np.array([s[1] for s in samples[lo:hi]])
            rows.append({"phase": phase, "calls": int(hi - lo), "items_at_end": samples[hi - 1][0],
                         "p50": float(np.percentile(times, 50)), "p95": float(np.percentile(times, 95)),
                         "p99": float(np.percentile(times, 99)), "max": float(times.max())})
    return rows
