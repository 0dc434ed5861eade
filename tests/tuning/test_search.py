"""The search's decisions from measured intervals: who survives a round, what is tried next, what halving costs,
and a winner only when it is clearly faster than the default (a tie keeps the default)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kernelsage.tools.results import Timing
from kernelsage.tuning.search import (
    Measurement,
    beats_default,
    gain,
    halving_cost,
    next_candidates,
    ranked,
    round_agrees,
    rung_reps,
    survivors,
)
from kernelsage.tuning.space import Tunable, grid_space

SPACE = grid_space([Tunable("A", (2, 1, 4, 8)), Tunable("B", (1, 2))])
DEFAULT = SPACE.default


def timing(median: float, spread: float = 0.01) -> Timing:
    return Timing(mean=median, median=median, cv=0.0, minimum=median * (1 - spread), warmup=1, reps=20,
                  ci_low=median * (1 - spread), ci_high=median * (1 + spread))


def measured(config, relative: float, spread: float = 0.01, reference: float = 1.0) -> Measurement:
    return Measurement(config, timing(relative * reference, spread), timing(reference, spread))


def a(value: int, b: int = 1):
    return (("A", value), ("B", b))


def test_a_configuration_clearly_slower_than_the_fastest_is_dropped_even_within_keep() -> None:
    round_ = [measured(DEFAULT, 1.0), measured(a(4), 0.5), measured(a(8), 2.0), measured(a(1), 0.52)]
    assert survivors(round_, keep=4, default=DEFAULT) == [a(4), a(1), DEFAULT]


def test_the_default_always_survives_within_keep() -> None:
    round_ = [measured(a(4), 0.50), measured(a(1), 0.51), measured(a(8), 0.52), measured(DEFAULT, 0.53)]
    assert survivors(round_, keep=2, default=DEFAULT) == [a(4), DEFAULT]


def test_noisy_configurations_tie_and_stay() -> None:
    # 20% intervals: none is clearly slower than the fastest, so the keep cap alone decides.
    round_ = [measured(DEFAULT, 1.0, 0.2), measured(a(4), 0.9, 0.2), measured(a(8), 1.1, 0.2)]
    assert survivors(round_, keep=3, default=DEFAULT) == [a(4), DEFAULT, a(8)]


def test_relative_times_cancel_a_busier_machine() -> None:
    # a(4) ran while everything took twice as long (its reference too): relative to it, it is the faster one.
    slow_run, quiet_run = measured(a(4), 0.6, reference=2.0), measured(DEFAULT, 1.0, reference=1.0)
    assert slow_run.candidate.median > quiet_run.candidate.median
    assert ranked([quiet_run, slow_run])[0] is slow_run and beats_default([(quiet_run, slow_run)], min_rounds=4)


def test_one_round_needs_intervals_apart_by_the_minimum_gain() -> None:
    assert not beats_default([(measured(DEFAULT, 1.0, 0.1), measured(a(4), 0.95, 0.1))], 4)  # intervals overlap
    assert not beats_default([(measured(DEFAULT, 1.0, 0.01), measured(a(4), 0.97, 0.01))], 4)  # apart, under 5%
    assert beats_default([(measured(DEFAULT, 1.0, 0.01), measured(a(4), 0.8, 0.01))], 4)
    assert not beats_default([], 4)


def test_paired_rounds_need_the_best_faster_in_every_one() -> None:
    # Wide intervals (a busy machine) never separate, but four rounds all 20% apart do; one contrary round ties.
    wins = [(measured(DEFAULT, 1.0, 0.5), measured(a(4), 0.8, 0.5)) for _ in range(4)]
    assert beats_default(wins, min_rounds=4)
    assert not beats_default([*wins[:3], (measured(DEFAULT, 1.0, 0.5), measured(a(4), 0.97, 0.5))], min_rounds=4)
    assert not beats_default(wins[:3], min_rounds=4)  # three rounds: the intervals decide, and they overlap
    assert round_agrees(wins[0]) and not round_agrees((measured(DEFAULT, 1.0), measured(a(4), 0.97)))


def test_the_gain_is_the_median_round_with_its_interval() -> None:
    rounds = [(measured(DEFAULT, 1.0), measured(a(4), best)) for best in (0.5, 0.4, 0.8, 0.5)]
    median, low, high = gain(rounds)
    assert median == 2.0 and low == 1.25 and high == 2.5
    one_median, one_low, one_high = gain([(measured(DEFAULT, 1.0, 0.1), measured(a(4), 0.5, 0.1))])
    assert abs(one_median - 2.0) < 1e-9 and one_low < 2.0 * 0.9 / 1.1 + 1e-9 and one_high > 2.0 * 1.1 / 0.9 - 1e-9


def test_next_candidates_are_untried_neighbours_of_the_fastest_first() -> None:
    done = [measured(DEFAULT, 1.0), measured(a(4), 0.5), measured(a(1), 2.0)]
    tried = {m.config for m in done}
    assert next_candidates(SPACE, done, tried, parents=1) == [a(8), a(4, 2)]
    assert next_candidates(SPACE, done, tried, parents=2) == [a(8), a(4, 2), a(2, 2)]


def test_halving_costs_every_rung_then_the_paired_rounds() -> None:
    assert [halving_cost(n, 4) for n in (1, 2, 3, 4, 5)] == [0, 8, 11, 12, 16]
    assert halving_cost(3, 1) == 5


def test_halving_rungs_time_more_calls_within_the_time_share() -> None:
    assert [rung_reps(20, 2, rung, 0.001, 10.0) for rung in range(3)] == [40, 80, 160]
    assert rung_reps(20, 2, 2, 0.1, 10.0) == 100  # 160 calls of 0.1 s would take 16 s
    assert rung_reps(20, 2, 0, 5.0, 10.0) == 20  # never fewer than the exploration's


@given(st.lists(st.floats(0.1, 10.0), min_size=1, max_size=12), st.integers(0, 6), st.integers(0, 11))
def test_survivors_keep_at_most_keep_and_always_the_default(times: list[float], keep: int, which: int) -> None:
    configs = list(SPACE.configs)[:len(times)]
    default = configs[which % len(configs)]
    round_ = [measured(c, t, 0.05) for c, t in zip(configs, times, strict=False)]
    kept = survivors(round_, keep, default)
    assert default in kept and len(kept) <= max(keep, 2) and len(set(kept)) == len(kept)
    assert ranked(round_)[0].config in kept
