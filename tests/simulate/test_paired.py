"""Paired streams on the real database: two policies on the same seed meet the same world and the same
draws (common random numbers), and an item's truth in an episode does not depend on the policy that showed
it. The generator is the simulator's stochastic stand-in (no model)."""

from __future__ import annotations

import pickle
from collections import defaultdict

from kernelsage.evals.simulator.run import StreamResult, StreamSpec, run_stream
from kernelsage.evals.simulator.standin import StandInConfig
from kernelsage.evals.simulator.world import WorldConfig
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore

SMALL_WORLD = WorldConfig(operators_per_level=4, categories=2, lessons=24)


def _first_correct(result: StreamResult, position: int) -> int:
    found = result.records[position].first_correct_round
    return 31 if found is None else found


def test_policies_on_one_seed_share_the_world_and_every_episodes_draws(store: MemoryStore) -> None:
    # `none` shows nothing (its used value is always 0); sage's episodes differ only by what its memory showed.
    spec = StreamSpec(policy="none", order="mixed", seed=5, episodes=40, world=SMALL_WORLD)
    plain = run_stream(store, spec)
    sage = run_stream(store, StreamSpec(policy="sage", order="mixed", seed=5, episodes=40, world=SMALL_WORLD))
    assert plain.operators.tolist() == sage.operators.tolist()
    both_solved = same_effect = 0
    for p, ((draft_effect, _), (plain_effect, _)) in enumerate(zip(sage.truth.effects, plain.truth.effects,
                                                                   strict=True)):
        assert plain_effect == 0.0
        a, b = sage.records[p], plain.records[p]
        if a.solved and b.solved:  # the first kernel's latency is drawn whatever round drafting ended in
            assert a.t_first == b.t_first
            both_solved += 1
        # the same round chances: more used value can only bring the first correct kernel earlier
        if draft_effect > 0:
            assert _first_correct(sage, p) <= _first_correct(plain, p)
        elif draft_effect < 0:
            assert _first_correct(sage, p) >= _first_correct(plain, p)
        else:  # nothing of value used: the very same drafting
            assert _first_correct(sage, p) == _first_correct(plain, p)
            same_effect += 1
    assert both_solved >= 10 and same_effect >= 1  # the checks above really ran


def _truth_by_key(result: StreamResult) -> dict[tuple[int, int], float]:
    """(episode, the item's stable key) -> its truth there, for knowledge-pack items (the same lesson in
    every policy's memory)."""
    return {(p, result.truth.key_of[item]): value for p, shown in enumerate(result.truth.shown_values)
            for item, value in shown.items() if result.truth.key_of[item] < 1 << 62}


def test_an_item_shown_in_the_same_episode_has_the_same_truth_under_every_policy(store: MemoryStore) -> None:
    # An easy gate and a high chance of use fill sage's hot memory early: its resident rules are shown at
    # drafting and again at refining, where atu-only shows the same pack items from cold memory.
    params = SageParams(hot_budget_tokens=2_000, k_ado=1, k_op=1)
    common = dict(order="mixed", seed=3, episodes=30, world=SMALL_WORLD, params=params,
                  standin=StandInConfig(use_base=0.6), new_experiences=False)
    sage = run_stream(store, StreamSpec(policy="sage", **common))  # type: ignore[arg-type]
    atu = run_stream(store, StreamSpec(policy="atu-only", **common))  # type: ignore[arg-type]
    sage_truth, atu_truth = _truth_by_key(sage), _truth_by_key(atu)
    shared = sorted(set(sage_truth) & set(atu_truth))
    assert all(sage_truth[k] == atu_truth[k] for k in shared)
    stages: dict[tuple[int, int], set[str]] = defaultdict(set)  # sage's showings in both stages of an episode
    for p, record in enumerate(sage.records):
        for exposure in record.adoption:
            stages[(p, sage.truth.key_of[exposure.item_id])].add(exposure.stage)
    twice = [k for k in shared if len(stages[k]) == 2 and sage_truth[k] != 0.0]
    assert twice, "no item of value was shown by sage at both stages and by atu-only in the same episode"


def test_one_stream_is_a_picklable_unit_of_work_with_the_figures_of_a_study(store: MemoryStore,
                                                                             database_url: str) -> None:
    # What a dispatcher (a process pool, Ray) sends and gets back: the entry point and the stream's spec go
    # through pickle, the worker opens its own store from the URL, and its outcome comes back through pickle
    # with the figures the in-process study computed (streams are independent of what ran before them).
    from kernelsage.evals.simulator.dispatch import run_one
    from kernelsage.evals.simulator.study import StudySpec, run_study, study_streams

    spec = StudySpec(policies=("sage", "none"), orders=("mixed",), seeds=2, episodes=6, world=SMALL_WORLD)
    here = run_study(store, spec, keep_examples=False)
    entry = pickle.loads(pickle.dumps(run_one))
    outcomes = [pickle.loads(pickle.dumps(entry(pickle.loads(pickle.dumps(s)), database_url)))
                for s in reversed(study_streams(spec))]  # in another order than the study's
    for outcome in outcomes:
        seeds = here.per_seed[(outcome.spec.order, outcome.spec.policy)]
        assert outcome.measures == seeds[outcome.spec.seed - spec.first_seed] and outcome.problems == []


def test_experiences_the_memory_merges_into_near_duplicates_keep_the_truth_straight(store: MemoryStore) -> None:
    # A low merge threshold makes the commit merge many new experiences into items it holds (or earlier ones
    # of the batch): the truth must still know the lesson of every item the memory stores.
    spec = StreamSpec(policy="atu-only", order="mixed", seed=2, episodes=24, world=SMALL_WORLD, keep_namespace=True,
                      params=SageParams(merge_similarity=0.6))
    result = run_stream(store, spec)
    memory = store.open(result.records[0].namespace, create=False, embedding_dim=SMALL_WORLD.dim)
    try:
        items = memory.list_items(limit=memory.count_items())
        assert result.truth.merged > 0 and len(items) == result.truth.items
        assert all(result.truth.lesson_of[i.id] == i.metadata["lesson"] for i in items)
    finally:
        store.delete_namespace(memory.name)
