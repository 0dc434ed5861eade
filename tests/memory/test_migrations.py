"""Schema upgrades on a database that holds data: a database at the previous version is migrated in place
and then works (retrieval, consolidation, deleting a namespace) as a fresh one does."""

from __future__ import annotations

import psycopg
import pytest

from kernelsage.memory_backend import migrations
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from tests.memory.helpers import seed_items, unit_vectors
from tests.memory.test_hybrid import Pointing


def _events(conn: psycopg.Connection, namespace_id: int) -> list[tuple[int, str]]:
    return [(r["item_id"], r["event"]) for r in conn.execute(
        "SELECT item_id, event FROM ks_hot_events WHERE namespace_id = %s ORDER BY hot_version, item_id",
        (namespace_id,))]


def test_migration_6_keeps_residency_and_history_of_a_database_with_data(empty_database: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pool = open_pool(empty_database)
    try:
        with monkeypatch.context() as old:  # the schema as the previous release left it
            old.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:5])
            before = MemoryStore(pool)
            assert before.applied_migrations() == [1, 2, 3, 4, 5]
            vectors = unit_vectors(6, seed=8)
            kept, gone = before.open("kept", embedding_dim=16), before.open("gone", embedding_dim=16)
            ids, other = seed_items(kept, vectors), seed_items(gone, vectors)
            with pool.connection() as conn:  # a resident rule each, as a consolidation of that release wrote it
                for namespace, item in ((kept, ids[0]), (gone, other[0])):
                    conn.execute("UPDATE ks_items SET state = 'hot', rule_text = text, rule_tokens = tokens "
                                 "WHERE id = %s", (item,))
                    conn.execute("UPDATE ks_item_vectors SET resident = true WHERE item_id = %s", (item,))
                    conn.execute("INSERT INTO ks_hot_events (namespace_id, hot_version, item_id, event, priority) "
                                 "VALUES (%s, 1, %s, 'promoted', 0.5)", (namespace.info.id, item))
                    conn.execute("UPDATE ks_namespaces SET hot_version = 1 WHERE id = %s", (namespace.info.id,))

        store = MemoryStore(pool)  # opening with this release upgrades it
        assert store.applied_migrations() == [v for v, _, _ in migrations.MIGRATIONS]
        with pool.connection() as conn:
            flag = conn.execute("SELECT count(*) AS n FROM information_schema.columns "
                                "WHERE table_name = 'ks_item_vectors' AND column_name = 'resident'").fetchone()
            assert flag["n"] == 0
            assert _events(conn, kept.info.id) == [(ids[0], "promoted")]  # history kept

        memory = store.open("kept")
        shown = memory.retrieve(vectors[0])
        assert [s.item.id for s in shown.hot] == [ids[0]] and shown.hot_version == 1
        assert {s.item.id for s in shown.cold} == set(ids[1:])  # the resident rule is not retrieved from cold

        result = memory.consolidate()  # utility 0: the rule has no positive priority and is displaced
        assert result.demoted == (ids[0],) and result.hot == ()
        assert ids[0] in {s.item.id for s in memory.retrieve(vectors[0]).cold}
        with pool.connection() as conn:
            assert _events(conn, kept.info.id) == [(ids[0], "promoted"), (ids[0], "demoted")]

        assert store.delete_namespace("gone")  # its events go with it, and only its
        with pool.connection() as conn:
            assert _events(conn, gone.info.id) == []
            assert len(_events(conn, kept.info.id)) == 2
        store.close()
    finally:
        pool.close()


def test_migration_7_moves_the_names_of_a_database_with_data(empty_database: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    pool = open_pool(empty_database)
    try:
        with monkeypatch.context() as old:  # names in migration 5's GIN-indexed lexemes
            old.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:6])
            before = MemoryStore(pool)
            memory = before.open("named", embedding_dim=8)
            ids = memory.add_items([NewItem(text=f"call DataCopyPadV{i} on the tail", evidence=f"episode e{i}",
                                            embedding=v.tolist()) for i, v in enumerate(unit_vectors(4, dim=8, seed=3))])
            gone = before.open("gone", embedding_dim=16)
            seed_items(gone, unit_vectors(3, seed=4))
        store = MemoryStore(pool)
        with pool.connection() as conn:
            assert conn.execute("SELECT to_regclass('ks_item_lexemes') AS t").fetchone()["t"] is None
            names = {(r["name"], r["item_id"]) for r in conn.execute(
                "SELECT name, item_id FROM ks_item_names WHERE namespace_id = %s", (memory.info.id,))}
        # name-shaped words only (not "call", "the", "tail", "episode"; "e0" is too short), lower-cased
        assert names == {(f"datacopypadv{i}", item) for i, item in enumerate(ids)}
        hybrid = store.open("named", embeddings=Pointing(), policy="static",
                            params=SageParams(retrieval="hybrid", pool_size=2, top_k=1))
        assert hybrid.retrieve("error: 'DataCopyPadV2' was not declared").cold[0].item.id == ids[2]
        assert store.delete_namespace("gone")
        with pool.connection() as conn:
            left = conn.execute("SELECT namespace_id, count(*) AS n FROM ks_item_names GROUP BY 1").fetchall()
        assert [(r["namespace_id"], r["n"]) for r in left] == [(memory.info.id, 4)]
        store.close()
    finally:
        pool.close()


def test_migration_8_names_the_items_of_a_database_with_data_as_engineers_write_them(
        empty_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = open_pool(empty_database)
    try:
        with monkeypatch.context() as old:  # names by migration 7's rule: `tl.dot` split, `Muls` prose
            old.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:7])
            memory = MemoryStore(pool).open("named", embedding_dim=8)
            texts = ["Use tl.dot for the tile product", "Muls scales the tile by a scalar", "Write it in C"]
            ids = memory.add_items([NewItem(text=t, embedding=v.tolist())
                                    for t, v in zip(texts, unit_vectors(3, dim=8, seed=5), strict=True)])
            with pool.connection() as conn:
                assert not conn.execute("SELECT 1 FROM ks_item_names WHERE namespace_id = %s",
                                        (memory.info.id,)).fetchall()
        store = MemoryStore(pool)
        with pool.connection() as conn:
            names = {(r["name"], r["item_id"]) for r in conn.execute(
                "SELECT name, item_id FROM ks_item_names WHERE namespace_id = %s", (memory.info.id,))}
        assert names == {("tl.dot", ids[0]), ("use", ids[0]), ("muls", ids[1]), ("write", ids[2])}
        hybrid = store.open("named", embeddings=Pointing(), policy="static",
                            params=SageParams(retrieval="hybrid", pool_size=2, top_k=1))
        assert hybrid.retrieve("CompilationError: triton.language.dot got incompatible shapes").cold[0].item.id == ids[0]
        assert hybrid.retrieve("error: no matching function for call to 'Muls'").cold[0].item.id == ids[1]
        store.close()
    finally:
        pool.close()
