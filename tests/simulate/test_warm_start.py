"""The simulator's warm start: every policy starts from the same mined lessons (mined.py), chosen as the mining
keeps them, and a warm start of helpful speed lessons shows where its assumptions say it should. The generator is
the simulator's stochastic stand-in (no model); the memory is the real one, on the real database."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.evals.simulator import draws
from kernelsage.evals.simulator.dispatch import invariant_problems
from kernelsage.evals.simulator.measures import stream_measures
from kernelsage.evals.simulator.mined import PROVENANCE, WarmStart, mine, mined_items, parse_warm_start
from kernelsage.evals.simulator.run import StreamResult, StreamSpec, run_stream
from kernelsage.evals.simulator.world import WorldConfig, build_world
from kernelsage.memory_backend.store import MemoryStore

SMALL_WORLD = WorldConfig(operators_per_level=4, categories=2, lessons=24)


def test_warm_start_arguments_and_bad_ones() -> None:
    assert parse_warm_start("mined") == WarmStart(lessons=3)
    assert parse_warm_start("mined:12") == WarmStart(lessons=12)
    assert parse_warm_start("cold") is None and parse_warm_start("mined:0") is None
    for text in ("mined:-1", "mined:many", "pack", "cold:3"):
        with pytest.raises(ConfigurationError, match="cannot read warm start"):
            parse_warm_start(text)
    with pytest.raises(ConfigurationError, match="unknown warm-start setting"):
        WarmStart().with_overrides(colour=1)
    with pytest.raises(ConfigurationError, match="keep_share"):
        WarmStart().with_overrides(keep_share=0)


def test_mined_lessons_are_distinct_speed_lessons_among_the_best_for_their_source() -> None:
    for seed in range(4):
        world = build_world(WorldConfig(), seed)
        found = mine(world, WarmStart(lessons=10, false_keep=0.0), seed)
        assert len(found) == 10 and len({m.lesson for m in found}) == 10
        taken: set[int] = set()
        for m in found:  # in the order mined: each the best fifth of what its source could still teach
            assert world.lessons[m.lesson].stage == "refine" and not m.spurious
            helpful = [ls for ls in world.stage_lessons["refine"] if world.values[ls, m.source] > 0 and ls not in taken]
            ranked = sorted(helpful, key=lambda ls: -world.values[ls, m.source])
            assert m.lesson in ranked[: math.ceil(WarmStart().keep_share * len(ranked))]
            taken.add(m.lesson)
        # every kept removal a false keep: speed lessons of any value, useless and harmful ones included
        spurious = mine(world, WarmStart(lessons=30, false_keep=1.0), seed)
        assert all(m.spurious and world.lessons[m.lesson].stage == "refine" for m in spurious)
    worlds = [build_world(WorldConfig(), seed) for seed in range(8)]
    kinds = {w.lessons[m.lesson].kind for s, w in enumerate(worlds) for m in mine(w, WarmStart(lessons=30, false_keep=1.0), s)}
    assert {"useless", "harmful"} <= kinds


def _mined_by_key(result: StreamResult) -> dict[int, int]:
    """Stable key -> lesson of the items that are not experiences of the stream (pack and mined)."""
    return {key: result.truth.lesson_of[item] for item, key in result.truth.key_of.items() if key < 1 << 62}


def test_every_policy_starts_from_the_same_mined_memory_and_the_pack_is_unchanged(store: MemoryStore) -> None:
    warm = WarmStart(lessons=3)
    common = dict(order="mixed", seed=4, episodes=3, world=SMALL_WORLD, keep_namespace=True)
    results = [run_stream(store, StreamSpec(policy=p, warm_start=warm, **common))  # type: ignore[arg-type]
               for p in ("sage", "uniform", "none")]
    cold = run_stream(store, StreamSpec(policy="sage", **common))  # type: ignore[arg-type]
    try:
        expected = mined_items(build_world(SMALL_WORLD, 4), warm, 4)
        assert expected and all(int(i.metadata["key"]) == draws.mined_key(n) for n, i in enumerate(expected))
        stored = []
        for result in results:
            memory = store.open(result.records[0].namespace, create=False, embedding_dim=SMALL_WORLD.dim)
            mined = sorted((i for i in memory.list_items(limit=1_000) if i.provenance == PROVENANCE),
                           key=lambda i: i.metadata["key"])
            stored.append([(i.text, i.operator, i.kind, i.metadata["lesson"], i.metadata["key"]) for i in mined])
            assert invariant_problems(result) == []
        assert stored[0] == stored[1] == stored[2] == [
            (i.text, i.operator, "experience", i.metadata["lesson"], i.metadata["key"]) for i in expected]
        # the knowledge pack is the cold start's, item for item; the mined items come on top of it
        pack = _mined_by_key(cold)
        for result in results:
            assert {k: v for k, v in _mined_by_key(result).items() if k < 1 << 61} == pack
            assert result.truth.items - _experiences(result) == len(pack) + len(expected)
    finally:
        for result in (*results, cold):
            store.delete_namespace(result.records[0].namespace)


def _experiences(result: StreamResult) -> int:
    return sum(1 for key in result.truth.key_of.values() if key >= 1 << 62)


def test_a_warm_start_of_helpful_speed_lessons_helps_refining_under_its_assumptions(store: MemoryStore) -> None:
    # A fixed memory (no new experiences) isolates the start: the cold and the warm stream meet the same world,
    # operators and draws, and differ only by the mined items their memories hold. Mined lessons are speed
    # lessons that help their source's category, so the refine stage should use more value and make more
    # kernels faster; a warm start that did not reach the refine stage, or hurt it, fails here.
    common = dict(policy="atu-only", order="mixed", seed=1, episodes=48, world=SMALL_WORLD, new_experiences=False)
    cold = run_stream(store, StreamSpec(**common))  # type: ignore[arg-type]
    warm = run_stream(store, StreamSpec(warm_start=WarmStart(lessons=3, false_keep=0.0), **common))  # type: ignore[arg-type]

    def refine_value(result: StreamResult) -> float:
        return float(np.sum([e for _, e in result.truth.effects if e is not None]))

    assert refine_value(warm) > refine_value(cold)
    made_faster = [sum(r.self_speedup > 1 for r in s.records if r.solved) for s in (cold, warm)]
    assert made_faster[1] > made_faster[0]
    assert stream_measures(warm)["s_self_mean"] > stream_measures(cold)["s_self_mean"]


def test_simulate_takes_a_warm_start_and_names_bad_ones(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from kernelsage.cli import app

    runner = CliRunner()
    for args, message in ((["--warm-start", "mined:x"], "cannot read warm start"),
                          (["--mined", "keep_share=0.5"], "give --warm-start mined[:N]"),
                          (["--warm-start", "mined", "--mined", "colour=1"], "unknown warm-start setting")):
        result = runner.invoke(app, ["simulate", *args, "--episodes", "2", "--seeds", "1", "--no-report"])
        assert isinstance(result.exception, ConfigurationError) and message in str(result.exception), args
    monkeypatch.setenv("DATABASE_URL", database_url)
    result = runner.invoke(app, ["simulate", "--policies", "sage,none", "--orders", "mixed", "--seeds", "1",
                                 "--episodes", "2", "--operators-per-level", "4", "--warm-start", "mined:2",
                                 "--mined", "false_keep=0", "--no-report", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.splitlines()[-1])
    assert data["settings"]["warm_start"] == {"lessons": 2, "keep_share": 0.2, "false_keep": 0.0}
    assert data["invariant_problems"] == []
    # the pack (one item per lesson, 150) and the two mined lessons; `none` stores no experience
    assert data["policies"]["none"]["items"]["mean"] == 152 <= data["policies"]["sage"]["items"]["mean"]
