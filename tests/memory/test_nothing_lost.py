"""Nothing lost, whatever the text: a name past the index's limits is kept by its hash and still found, and an
experience the database refuses leaves the episode, its attempts and its credits recorded."""

from __future__ import annotations

import numpy as np
import pytest

from kernelsage.errors import DatabaseError, EpisodeError
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.memory_backend.tokens import approx_token_count
from tests.memory.helpers import commit, episode, seed_items, unit_vectors
from tests.memory.test_hybrid import Pointing, axis

MANGLED = "_ZN7AscendC" + "".join(f"N{n}Tiling{n}E" for n in range(800))  # 10,000 characters or more


def test_a_ten_thousand_character_symbol_is_committed_and_found_by_name(store: MemoryStore, namespace: str) -> None:
    assert len(MANGLED) >= 10_000
    memory = store.open(namespace, embeddings=Pointing(), policy="static",
                        params=SageParams(retrieval="hybrid", pool_size=5, top_k=3))
    shown = memory.add_items([NewItem(text=f"unrelated lesson {n} about tiling", embedding=axis(1 + n % 6, lean=3.0))
                              for n in range(12)])
    lesson = NewItem(text="The linker could not find the tiling struct's template: declare it in op_host",
                     evidence=f"ld: undefined reference to `{MANGLED}'", embedding=axis(7))
    result = commit(memory, episode("long-symbol", "add", shown[:2], shown[:1]), [lesson])
    assert result.applied and len(result.new_item_ids) == 1 and not result.unstored
    assert {e.item_id for e in memory.load_episode("long-symbol").exposures} == set(shown[:2])
    query = f"kernel.o: in function `Process': undefined reference to `{MANGLED}'"
    found = [s.item.id for s in memory.retrieve(query).cold]
    assert result.new_item_ids[0] in found  # the vectors point away: the name found it


def test_an_experience_the_database_refuses_leaves_the_episode_recorded(database_url: str, namespace: str) -> None:
    # A user's token counter that answers 0 for one text breaks the table's CHECK (tokens > 0): the database
    # refuses that experience, not the episode that wrote it, nor the other experience beside it.
    def counter(text: str) -> int:
        return 0 if "refused" in text else approx_token_count(text)

    with MemoryStore.connect(database_url, token_counter=counter) as store:
        memory = store.open(namespace, embedding_dim=16)
        ids = seed_items(memory, unit_vectors(4))
        vectors = unit_vectors(2, seed=9)
        lessons = [NewItem(text="this lesson is refused", embedding=vectors[0].tolist()),
                   NewItem(text="this lesson is kept: vectorise the tail", embedding=vectors[1].tolist())]
        result = commit(memory, episode("refused", "relu", ids[:3], ids[:1]), lessons)
        assert result.applied and len(result.new_item_ids) == 1
        assert len(result.unstored) == 1 and "experience 1" in result.unstored[0] and "23514" in result.unstored[0]
        assert memory.get_item(result.new_item_ids[0]).text == lessons[1].text
        assert set(memory.episode_credits("refused")) == set(ids[:3])
        assert memory.get_item(ids[0]).n_ado == 1  # the adoption was credited
        again = commit(memory, episode("refused", "relu", ids[:3], ids[:1]), lessons)
        assert not again.applied and again.new_item_ids == result.new_item_ids  # exactly once, still
        assert memory.count_items() == 5 and np.isfinite(memory.get_item(ids[0]).utility)


def test_a_refused_episode_is_a_kernelsage_error_with_nothing_recorded(store: MemoryStore, namespace: str) -> None:
    # A server that refuses the episode row itself (a trigger of the operator's, here): with experiences or
    # without, the commit ends in one DatabaseError and writes nothing, neither the episode nor an experience.
    memory = store.open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(3))
    with store.pool.connection() as conn:
        conn.execute("CREATE FUNCTION ks_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                     "IF NEW.episode_id LIKE 'refused-whole%' THEN RAISE EXCEPTION 'refused by the operator' "
                     "USING ERRCODE = '22023'; END IF; RETURN NEW; END $$")
        conn.execute("CREATE TRIGGER ks_test_refuse BEFORE INSERT ON ks_episodes FOR EACH ROW "
                     "EXECUTE FUNCTION ks_test_refuse()")
    try:
        for n, lessons in enumerate(([], [NewItem(text="a lesson", embedding=unit_vectors(1, seed=5)[0].tolist())])):
            with pytest.raises(DatabaseError, match="refused episode 'refused-whole"):
                commit(memory, episode(f"refused-whole-{n}", "relu", ids[:2], ids[:1]), lessons)
            with pytest.raises(EpisodeError):
                memory.load_episode(f"refused-whole-{n}")
        assert memory.count_items() == 3 and memory.get_item(ids[0]).n_ado == 0
    finally:
        with store.pool.connection() as conn:
            conn.execute("DROP TRIGGER ks_test_refuse ON ks_episodes")
            conn.execute("DROP FUNCTION ks_test_refuse()")
