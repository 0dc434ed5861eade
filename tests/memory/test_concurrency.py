"""Several processes sharing one memory: commits lose no update, curators never interleave."""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time

import pytest

from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.items import MemoryItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import commit, episode, seed_items, unit_vectors

WORKERS = 4
EPISODES_PER_WORKER = 12


def _commit_worker(url: str, namespace: str, worker: int, item_ids: list[int]) -> None:
    store = MemoryStore(open_pool(url, max_size=1), owns_pool=True)
    memory = store.open(namespace, create=False)
    for n in range(EPISODES_PER_WORKER):
        # Every episode shows all items and adopts the first; every worker uses its own operator.
        commit(memory, episode(f"w{worker}-e{n}", f"op{worker}", item_ids, item_ids[:1]))
        commit(memory, episode(f"w{worker}-e{n}", f"op{worker}", item_ids, item_ids[:1]))  # a retry
    store.close()


def test_concurrent_commits_from_four_processes_lose_no_update(store: MemoryStore, database_url: str,
                                                               namespace: str) -> None:
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(3))
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_commit_worker, args=(database_url, namespace, w, ids))
               for w in range(WORKERS)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
        assert process.exitcode == 0
    total = WORKERS * EPISODES_PER_WORKER
    adopted, ignored = memory.get_item(ids[0]), memory.get_item(ids[1])
    assert adopted.n_ret == ignored.n_ret == total
    assert adopted.n_ado == total and ignored.n_ado == 0
    assert adopted.adopting_ops == tuple(f"op{w}" for w in range(WORKERS))
    assert memory.info_now().episode_seq == total
    assert memory.stats()["episodes"] == total
    # Each update read the utility the previous one wrote: replaying the chain gives the same value.
    assert ignored.utility == pytest.approx(-0.2)
    assert adopted.utility == pytest.approx(0.5)  # every credit was z = 0.5: the mean stays 0.5


def test_two_curators_never_interleave(store: MemoryStore, namespace: str) -> None:
    params = SageParams(k_ado=1, k_op=1)
    memory = MemoryStore(store.pool, params=params).open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(4))
    commit(memory, episode("e1", "relu", ids, ids))
    spans: list[tuple[float, float]] = []

    def slow_abstraction(item: MemoryItem) -> str:
        start = time.monotonic()
        time.sleep(0.05)
        spans.append((start, time.monotonic()))
        return f"Rule: {item.text}"

    def curate() -> None:
        MemoryStore(store.pool, params=params).open(namespace).consolidate(abstract_rule=slow_abstraction)

    threads = [threading.Thread(target=curate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(spans) == len(ids)  # the second curator found every rule written: nothing abstracted twice
    ordered = sorted(spans)
    assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(ordered))
    assert {i.rule_text for i in memory.hot_rules()} == {f"Rule: {memory.get_item(i).text}" for i in ids}
