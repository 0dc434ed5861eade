"""The published signs the simulator judges, and how a sign is judged from paired per-seed figures.

Within a seed every arm (a policy, or a policy with one setting changed) meets the same world, the same
operators and the same draws (draws.py), so two arms are compared seed by seed: the difference in each
seed where both define the measure, its mean and 95% Student-t interval over the seeds. A sign *holds*
when the interval lies above 0, is *reversed* when it lies below 0, and is a *tie* when it contains 0.
Pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelsage.evals.simulator.measures import SHARES, interval, t95


@dataclass(frozen=True, kw_only=True)
class Claim:
    """first > second on each measure, in each order (arms are policy names or "policy NAME=VALUE")."""

    name: str
    first: str
    second: str
    measures: tuple[str, ...]
    orders: tuple[str, ...]
    first_order: str | None = None  # for order claims: the orders compared, on the arm `first`
    second_order: str | None = None


MAIN = ("er", "level3_er", "fast1", "credit_accuracy")
ORDERS = ("curriculum", "mixed", "level:3")
CLAIMS = (
    Claim(name="ATU > uniform credit", first="sage", second="uniform", measures=MAIN, orders=ORDERS),
    Claim(name="UGC > no consolidation", first="sage", second="atu-only", measures=MAIN, orders=ORDERS),
    Claim(name="UGC > random consolidation", first="sage", second="random-ugc", measures=MAIN, orders=ORDERS),
    Claim(name="curriculum > mixed", first="sage", second="sage", measures=("level3_er",), orders=(),
          first_order="curriculum", second_order="mixed"),
    Claim(name="mixed > hard-only", first="sage", second="sage", measures=("level3_er",), orders=(),
          first_order="mixed", second_order="level:3"),
    Claim(name="curriculum > hard-only", first="sage", second="sage", measures=("level3_er",), orders=(),
          first_order="curriculum", second_order="level:3"),
    Claim(name="utility reranking (gamma 0.3 > 0)", first="sage", second="sage gamma=0", measures=MAIN,
          orders=("mixed",)),
    Claim(name="gamma 0.3 > 1", first="sage", second="sage gamma=1", measures=MAIN, orders=("mixed",)),
    Claim(name="budget B 10,000 > 500", first="sage", second="sage B=500", measures=MAIN, orders=("mixed",)),
)


def paired(first: Sequence[float | None], second: Sequence[float | None], *, share: bool) -> dict[str, Any]:
    """first - second, seed by seed where both are defined, as an interval over those seeds (a difference
    of shares lies within [-1, 1])."""
    differences = [a - b if a is not None and b is not None else None for a, b in zip(first, second, strict=True)]
    return interval(differences, (-1.0, 1.0) if share else None)


def verdict(cell: dict[str, Any]) -> str:
    """holds / reversed when the interval excludes 0 on the published / the other side; else tie."""
    if cell["low"] is None or cell["high"] is None:
        return "n/a"
    return "holds" if cell["low"] > 0 else "reversed" if cell["high"] < 0 else "tie"


def detectable(cell: dict[str, Any], power_z: float = 0.8416) -> float | None:
    """The smallest true difference this many seeds would detect with 80% power (two-sided 5%): the
    interval's half-width scaled by (t + z_power) / t."""
    if cell["low"] is None or cell["high"] is None or cell["n"] < 2:
        return None
    half = (cell["high"] - cell["low"]) / 2
    t = t95(cell["n"] - 1)
    return half * (t + power_z) / t if math.isfinite(half) else None


def judge(values: dict[tuple[str, str], dict[str, list[float | None]]], claims: Sequence[Claim] = CLAIMS
          ) -> list[dict[str, Any]]:
    """Every claim's cells: `values[(arm, order)][measure]` holds each seed's figure (seeds aligned).
    Claims whose arms were not run are left out."""
    rows = []
    for claim in claims:
        pairs = [((claim.first, claim.first_order), (claim.second, claim.second_order), "")] \
            if claim.first_order else [((claim.first, o), (claim.second, o), o) for o in claim.orders]
        for a, b, order in pairs:
            if a not in values or b not in values:
                continue
            for measure in claim.measures:
                cell = paired(values[a][measure], values[b][measure], share=measure in SHARES)
                rows.append({"claim": claim.name, "order": order or f"{a[1]} vs {b[1]}", "measure": measure,
                             **cell, "verdict": verdict(cell), "detectable": detectable(cell)})
    return rows


WARM_MEASURES = ("er", "level3_er", "fast1", "s_self_mean")
WARM_ARM = " mined="  # a warm-start arm is named "POLICY mined=N"; its cold start is the arm "POLICY"


def warm_arm(policy: str, lessons: int) -> str:
    """The arm of `policy` starting from `lessons` mined lessons (0: its cold start, the policy's name)."""
    return f"{policy}{WARM_ARM}{lessons}" if lessons else policy


def warm_start_rows(values: dict[tuple[str, str], dict[str, list[float | None]]],
                    measures: Sequence[str] = WARM_MEASURES) -> list[dict[str, Any]]:
    """Each warm-start arm against its policy's cold start on the same order and seeds: warm - cold, paired by
    seed, in the order the arms were run. Arms without their cold start are left out."""
    rows = []
    for arm, order in values:
        policy, sep, lessons = arm.partition(WARM_ARM)
        if not sep or (policy, order) not in values:
            continue
        for measure in measures:
            cell = paired(values[(arm, order)][measure], values[(policy, order)][measure], share=measure in SHARES)
            rows.append({"claim": f"{policy}: {lessons} mined - cold", "order": order, "measure": measure, **cell,
                         "verdict": verdict(cell), "detectable": detectable(cell)})
    return rows
