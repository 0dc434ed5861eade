"""The simulator's random streams (draws.py) and the stand-in's use of them, as pure functions: an item's
draws do not depend on what else is shown, and each purpose has a stream of its own."""

from __future__ import annotations

import numpy as np
import pytest

from kernelsage.evals.simulator import draws
from kernelsage.evals.simulator.standin import StandInConfig, choose_used, draft
from kernelsage.evals.simulator.truth import contribution


def test_an_items_draws_depend_on_its_key_not_on_the_other_items_shown() -> None:
    alone = draws.item_uniforms(7, "standin", (12, 0), np.array([5], dtype=np.uint64), 3)
    crowd = draws.item_uniforms(7, "standin", (12, 0), np.array([99, 3, 5, 41], dtype=np.uint64), 3)
    assert np.array_equal(alone[0], crowd[2])
    other_episode = draws.item_uniforms(7, "standin", (13, 0), np.array([5], dtype=np.uint64), 3)
    other_seed = draws.item_uniforms(8, "standin", (12, 0), np.array([5], dtype=np.uint64), 3)
    assert not np.allclose(alone, other_episode) and not np.allclose(alone, other_seed)


def test_item_uniforms_are_uniform_and_independent_across_columns_and_nearby_keys() -> None:
    keys = np.arange(20_000, dtype=np.uint64)  # consecutive keys: the hash must scatter them
    u = draws.item_uniforms(0, "standin", (0, 0), keys, 2)
    assert u.min() >= 0.0 and u.max() < 1.0
    counts, _ = np.histogram(u[:, 0], bins=10, range=(0.0, 1.0))
    assert np.all(np.abs(counts - 2_000) < 200)  # about 4.5 standard deviations of a bin's count
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.03
    assert abs(np.corrcoef(u[:-1, 0], u[1:, 0])[0, 1]) < 0.03
    experience = [draws.experience_key(p, t) for p in range(3) for t in range(3)]
    assert len(set(experience)) == 9 and min(experience) > draws.pack_key(10**9)  # never a pack item's key


def test_purposes_and_policies_get_separate_streams() -> None:
    world, standin = draws.generator(3, "world").random(4), draws.generator(3, "standin").random(4)
    assert not np.allclose(world, standin)
    assert np.array_equal(draws.generator(3, "standin", 10, draws.DRAFT).random(4),
                          draws.generator(3, "standin", 10, draws.DRAFT).random(4))
    sage, uniform = draws.policy_key("sage"), draws.policy_key("uniform")
    assert sage != uniform and sage == draws.policy_key("sage")
    assert draws.integer(3, "policy", sage, 4, 0) != draws.integer(3, "policy", uniform, 4, 0)
    with pytest.raises(ValueError, match="unknown random stream"):
        draws.generator(3, "weather")


def test_capacity_keeps_the_used_items_with_the_lowest_keep_draws() -> None:
    config = StandInConfig(use_base=0.98, discernment=0.0, capacity=2)
    uniforms = np.array([[0.1, 0.9], [0.1, 0.2], [0.99, 0.0], [0.1, 0.5]])  # the third is not used at all
    assert choose_used(np.zeros(4), config, uniforms).tolist() == [False, True, False, True]


def test_a_larger_effect_never_delays_the_first_correct_kernel_under_the_same_draws() -> None:
    # Each round's chances are drawn up front: with the same stream, more used value can only make more
    # rounds compile and be correct (the coupling that makes paired comparisons sharp).
    config = StandInConfig()
    for position in range(200):
        rounds = [draft(3, effect, 30, config, draws.generator(1, "standin", position, draws.DRAFT)).first_correct
                  for effect in (-1.0, 0.0, 1.0, 2.0)]
        found = [31 if r is None else r for r in rounds]
        assert found == sorted(found, reverse=True), (position, rounds)


def test_an_items_truth_in_an_episode_is_what_it_contributed_whatever_stages_showed_it() -> None:
    # A draft lesson worth 0.8 here: shown at draft, or at draft and refine (a resident rule in an episode
    # that reached refining), it contributed 0.8; the refine showing neither adds nor halves it.
    assert contribution("draft", 0.8, ["draft"]) == contribution("draft", 0.8, ["draft", "refine"]) == 0.8
    assert contribution("draft", 0.8, ["refine"]) == 0.0  # shown only where it does nothing
    assert contribution("refine", -0.5, ["draft", "refine"]) == -0.5
