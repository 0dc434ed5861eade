"""Builders shared by the store tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kernelsage.memory_backend.items import CommitResult, NewItem
from kernelsage.memory_backend.records import EpisodeTrace, Exposure
from kernelsage.memory_backend.store import Memory


def unit_vectors(count: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    """Random unit vectors: distinct directions for test items."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(count, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def seed_items(memory: Memory, vectors: np.ndarray, operator: str = "relu") -> list[int]:
    return memory.add_items([
        NewItem(text=f"experience {i}: unroll the inner loop by {i % 8 + 1}", evidence=f"episode e{i}",
                operator=operator, embedding=v.tolist())
        for i, v in enumerate(vectors)
    ])


def episode(episode_id: str, operator: str, shown: Sequence[int], adopted: Sequence[int], *,
            t_first: float | None = 2.0, t_best: float | None = 1.0, hot: Sequence[int] = ()) -> EpisodeTrace:
    """An episode in which `shown` were shown in round 1 and `adopted` of them adopted."""
    return EpisodeTrace(
        episode_id=episode_id, operator=operator, t_first=t_first, t_best=t_best,
        exposures=tuple(
            Exposure(item_id=i, round=1, tier="hot" if i in hot else "cold", adopted=i in adopted,
                     rationale="adopted" if i in adopted else "not needed")
            for i in shown
        ),
    )


def commit(memory: Memory, trace: EpisodeTrace, new_items: Sequence[NewItem] = ()) -> CommitResult:
    """Commit `trace` as an agent would: first record what each round showed (the retrieval ledger the
    commit is checked against), then commit."""
    for round_no in sorted({e.round for e in trace.exposures}):
        memory.show(trace.episode_id, round_no,
                    [e.item_id for e in trace.exposures if e.round == round_no and e.tier == "cold"])
    return memory.commit_episode(trace, new_items)
