"""Judging a published sign from paired per-seed figures (simulator/claims.py), as pure functions."""

from __future__ import annotations

import pytest

from kernelsage.evals.simulator.claims import Claim, detectable, judge, paired, verdict


def test_a_sign_holds_is_reversed_or_ties_by_where_the_paired_interval_lies() -> None:
    assert verdict(paired([0.9, 0.8, 0.85], [0.7, 0.65, 0.7], share=True)) == "holds"
    assert verdict(paired([0.7, 0.65, 0.7], [0.9, 0.8, 0.85], share=True)) == "reversed"
    assert verdict(paired([0.9, 0.6, 0.8], [0.7, 0.8, 0.75], share=True)) == "tie"
    assert verdict(paired([0.9, None], [0.7, 0.8], share=True)) == "n/a"  # one defined pair: no spread


def test_pairing_is_by_seed_so_a_shared_world_effect_cancels() -> None:
    # Seeds differ a lot (hard and easy worlds); within each seed the first arm is 2 points better.
    first, second = [0.52, 0.91, 0.70, 0.63], [0.50, 0.89, 0.68, 0.61]
    cell = paired(first, second, share=True)
    assert cell["mean"] == pytest.approx(0.02) and verdict(cell) == "holds"
    assert detectable(cell) == pytest.approx(0.0, abs=1e-9)  # no spread of the differences at all


def test_claims_compare_arms_within_an_order_or_orders_within_an_arm() -> None:
    values = {("sage", "mixed"): {"er": [0.9, 0.8, 0.85]}, ("uniform", "mixed"): {"er": [0.8, 0.7, 0.8]},
              ("sage", "curriculum"): {"er": [0.95, 0.85, 0.9]}}
    claims = (Claim(name="a", first="sage", second="uniform", measures=("er",), orders=("mixed", "level:3")),
              Claim(name="b", first="sage", second="sage", measures=("er",), orders=(), first_order="curriculum",
                    second_order="mixed"))
    rows = judge(values, claims)  # level:3 was not run: left out
    assert [(r["claim"], r["order"], r["verdict"]) for r in rows] == [
        ("a", "mixed", "holds"), ("b", "curriculum vs mixed", "holds")]
    assert rows[0]["mean"] == pytest.approx(0.25 / 3)
