"""ATU's published properties (METHOD §4), checked over generated inputs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelsage.errors import EpisodeError
from kernelsage.memory_backend import atu
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.records import Exposure, PoolEntry

PARAMS = SageParams()
latency = st.floats(min_value=1e-6, max_value=1e3, allow_nan=False)
shown_sets = st.lists(st.integers(min_value=1, max_value=10_000), min_size=1, max_size=30, unique=True)


@st.composite
def episodes(draw):
    shown = draw(shown_sets)
    adopted = set(draw(st.lists(st.sampled_from(shown), unique=True)))
    solved = draw(st.booleans())
    if solved:
        first = draw(latency)
        best = draw(st.floats(min_value=first * 1e-3, max_value=first))
        z = atu.terminal_score(t_first=first, t_best=best, params=PARAMS)
    else:
        z = atu.terminal_score(t_first=None, t_best=None, params=PARAMS)
    return shown, adopted, z


def test_terminal_score_is_the_latency_gain_or_minus_delta() -> None:
    assert atu.terminal_score(t_first=4.0, t_best=1.0, params=PARAMS) == pytest.approx(0.75)
    assert atu.terminal_score(t_first=4.0, t_best=4.0, params=PARAMS) == 0.0
    assert atu.terminal_score(t_first=None, t_best=None, params=PARAMS) == -0.2
    assert atu.terminal_score(t_first=None, t_best=None, params=PARAMS.with_overrides(delta=0.5)) == -0.5


def test_terminal_score_rejects_non_positive_latency() -> None:
    with pytest.raises(EpisodeError, match="positive"):
        atu.terminal_score(t_first=0.0, t_best=0.0, params=PARAMS)


@given(latency, latency)
def test_terminal_score_of_a_solved_episode_lies_in_zero_one(first: float, best: float) -> None:
    z = atu.terminal_score(t_first=first, t_best=best, params=PARAMS)
    assert 0.0 <= z < 1.0


@given(episodes())
def test_adopted_credit_sums_to_z_and_unused_gets_minus_beta(episode) -> None:
    shown, adopted, z = episode
    credits = atu.item_credits(shown, adopted, z, PARAMS)
    assert set(credits) == set(shown)
    if adopted:
        assert math.isclose(sum(credits[i] for i in adopted), z, abs_tol=1e-12)
    for item in set(shown) - adopted:
        assert credits[item] == -PARAMS.beta


@given(episodes())
def test_credits_stay_in_the_published_range(episode) -> None:
    shown, adopted, z = episode
    for credit in atu.item_credits(shown, adopted, z, PARAMS).values():
        assert -0.2 <= credit < 1.0


def test_adopting_an_item_that_was_not_shown_is_an_error() -> None:
    with pytest.raises(EpisodeError, match="never shown"):
        atu.item_credits([1, 2], {3}, 0.5, PARAMS)


@given(st.integers(min_value=0, max_value=10**6))
def test_step_size_never_falls_below_eta_min(n_ret: int) -> None:
    assert atu.step_size(n_ret, PARAMS) >= PARAMS.eta_min


def test_step_size_is_the_running_mean_until_the_floor() -> None:
    assert atu.step_size(0, PARAMS) == 1.0
    assert atu.step_size(3, PARAMS) == 0.25
    assert atu.step_size(19, PARAMS) == pytest.approx(0.05)
    assert atu.step_size(500, PARAMS) == 0.05


def test_old_evidence_halves_in_about_13_5_updates_at_the_floor() -> None:
    # Start far past the running-mean phase; feed zero credit; the old utility decays geometrically.
    utility, n_ret, updates = 1.0, 1000, 0
    while utility > 0.5:
        utility = atu.update_utility(utility, 0.0, n_ret, PARAMS)
        n_ret += 1
        updates += 1
    assert updates == 14  # 0.95^13 = 0.513 > 0.5 >= 0.95^14 = 0.488: the half-life is 13.5
    assert math.log(0.5) / math.log(1 - PARAMS.eta_min) == pytest.approx(13.51, abs=0.01)


@given(st.lists(st.floats(min_value=-0.2, max_value=0.999), min_size=1, max_size=200))
def test_utility_stays_within_the_credit_range(credits: list[float]) -> None:
    utility = 0.0
    for n_ret, credit in enumerate(credits):
        utility = atu.update_utility(utility, credit, n_ret, PARAMS)
        assert -0.2 - 1e-12 <= utility < 1.0


@given(st.lists(st.floats(min_value=-0.2, max_value=0.999), min_size=1, max_size=19))
def test_first_updates_are_the_mean_of_the_credits(credits: list[float]) -> None:
    utility = 0.0
    for n_ret, credit in enumerate(credits):
        utility = atu.update_utility(utility, credit, n_ret, PARAMS)
    assert utility == pytest.approx(sum(credits) / len(credits), abs=1e-9)


def test_rerank_lets_utility_reorder_close_items_but_not_large_gaps() -> None:
    pool = [
        PoolEntry(item_id=1, relevance=0.80, utility=-0.2),
        PoolEntry(item_id=2, relevance=0.78, utility=0.5),
        PoolEntry(item_id=3, relevance=0.40, utility=0.9),
    ]
    ranked = atu.rerank(pool, PARAMS, k=3)
    assert [c.item_id for c in ranked] == [2, 1, 3]
    assert ranked[0].score == pytest.approx(0.78 + 0.3 * 0.5)
    assert [c.item_id for c in atu.rerank(pool, PARAMS, k=1)] == [2]


@given(st.floats(min_value=-1, max_value=1), st.floats(min_value=-0.2, max_value=0.999))
def test_negative_evidence_lowers_an_item_by_at_most_0_06(relevance: float, utility: float) -> None:
    score = atu.utility_score(relevance, utility, PARAMS)
    assert score >= relevance - 0.06 - 1e-12


def test_adoption_sets_count_an_item_adopted_in_any_round() -> None:
    exposures = [
        Exposure(item_id=1, round=1, tier="cold", adopted=False),
        Exposure(item_id=1, round=2, tier="cold", adopted=True),
        Exposure(item_id=2, round=1, tier="hot", adopted=False),
    ]
    shown, adopted = atu.adoption_sets(exposures)
    assert shown == [1, 2]
    assert adopted == {1}


def test_an_unresolved_exposure_blocks_credit() -> None:
    with pytest.raises(EpisodeError, match="no adoption state"):
        atu.adoption_sets([Exposure(item_id=7, round=3, tier="cold", adopted=None)])
