"""Export a namespace to JSONL and import it elsewhere: everything comes back, or nothing does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelsage.errors import NamespaceError, ReadOnlyMemoryError, TransferFormatError
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.memory_backend.transfer import export_jsonl, import_jsonl
from tests.memory.helpers import commit, episode, seed_items, unit_vectors


def _evolved_namespace(store: MemoryStore, name: str) -> list[int]:
    params = SageParams(k_ado=1, k_op=1)
    memory = MemoryStore(store.pool, params=params).open(name, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(5))
    commit(memory, episode("e1", "relu", ids[:3], ids[:1]))
    commit(memory, episode("e2", "gelu", ids[1:4], ids[1:2], t_first=None, t_best=None))
    memory.consolidate(abstract_rule=lambda item: f"Rule from {item.id}")
    return ids


def _normalised(path: Path) -> list[dict]:
    """Records with item ids replaced by their position, the only thing an import may change."""
    records = [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] != "end"]
    position = {r["id"]: n for n, r in enumerate(x for x in records if x["type"] == "item")}
    for record in records:
        if record["type"] == "namespace":
            record.pop("name")
        if record["type"] == "item":
            record["id"] = position[record["id"]]
        if "item_id" in record:
            record["item_id"] = position[record["item_id"]]
    return records


def test_export_then_import_round_trips_every_record(store: MemoryStore, namespace: str, tmp_path: Path) -> None:
    _evolved_namespace(store, namespace)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    count = export_jsonl(store, namespace, first)
    info = import_jsonl(store, first, namespace + "-copy")
    assert export_jsonl(store, info.name, second) == count
    assert _normalised(first) == _normalised(second)
    kinds = {r["type"] for r in _normalised(first)}
    assert kinds == {"namespace", "item", "episode", "exposure", "credit", "hot_event"}
    copy = store.open(info.name, read_only=True)
    original = store.open(namespace, read_only=True)
    ignored = {"namespace": None, "mean_utility": None}  # the mean is summed in another order
    assert copy.stats() | ignored == original.stats() | ignored
    assert copy.stats()["mean_utility"] == pytest.approx(original.stats()["mean_utility"])
    assert [r.rule_text for r in copy.hot_rules()] == [r.rule_text for r in original.hot_rules()]


def test_importing_over_an_existing_namespace_is_refused(store: MemoryStore, namespace: str, tmp_path: Path) -> None:
    _evolved_namespace(store, namespace)
    path = tmp_path / "m.jsonl"
    export_jsonl(store, namespace, path)
    with pytest.raises(TransferFormatError, match="exists already"):
        import_jsonl(store, path)


def test_a_broken_file_imports_nothing(store: MemoryStore, namespace: str, tmp_path: Path) -> None:
    _evolved_namespace(store, namespace)
    path = tmp_path / "m.jsonl"
    export_jsonl(store, namespace, path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:4], "{not json", *lines[4:]]) + "\n")
    with pytest.raises(TransferFormatError, match=r"m.jsonl:5: not valid JSON"):
        import_jsonl(store, path, namespace + "-broken")
    assert store.namespace_info(namespace + "-broken") is None

    dangling = [line for line in lines if json.loads(line)["type"] != "item"]
    path.write_text("\n".join(dangling) + "\n")
    with pytest.raises(TransferFormatError, match="refers to item"):
        import_jsonl(store, path, namespace + "-dangling")
    assert store.namespace_info(namespace + "-dangling") is None


def test_a_file_that_is_not_an_export_is_named(store: MemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text('{"type": "namespace", "name": "x"}\n')
    with pytest.raises(TransferFormatError, match="not a kernelsage-memory v2 export"):
        import_jsonl(store, path)
    with pytest.raises(TransferFormatError, match="no such file"):
        import_jsonl(store, tmp_path / "missing.jsonl")


def test_a_frozen_copy_serves_retrieval_but_refuses_updates(store: MemoryStore, namespace: str,
                                                            tmp_path: Path) -> None:
    ids = _evolved_namespace(store, namespace)
    path = tmp_path / "m.jsonl"
    export_jsonl(store, namespace, path)
    import_jsonl(store, path, namespace + "-frozen")
    frozen = store.open(namespace + "-frozen", read_only=True)
    assert len(frozen.retrieve(unit_vectors(1)[0], k=3).cold) == 3
    with pytest.raises(ReadOnlyMemoryError, match="read-only"):
        commit(frozen, episode("e9", "relu", [ids[0]], []))


def test_exporting_a_missing_namespace_leaves_no_file(store: MemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "none.jsonl"
    with pytest.raises(NamespaceError, match="does not exist"):
        export_jsonl(store, "no-such-namespace", path)
    assert not path.exists() and not (tmp_path / "none.jsonl.partial").exists()


def test_an_operator_listed_twice_counts_once_at_the_gate(store: MemoryStore, namespace: str) -> None:
    """The gate counts distinct adopting operators; an imported list that repeats one must not pass it."""
    from kernelsage.memory_backend.transfer import export_namespace, import_namespace

    memory = MemoryStore(store.pool, params=SageParams(k_ado=1, k_op=1)).open(namespace, embedding_dim=16)
    ids = seed_items(memory, unit_vectors(2))
    commit(memory, episode("e1", "relu", ids, ids[:1]))
    records = [dict(r) for r in export_namespace(store, namespace)]
    for record in records:
        if record["type"] == "item" and record["adopting_ops"]:
            record |= {"adopting_ops": ["relu", "relu", "relu"], "n_ado": 3}
    copy = import_namespace(store, namespace + "-repeats", iter(records))
    strict = MemoryStore(store.pool, params=SageParams(k_ado=3, k_op=3)).open(copy.name)
    assert strict.consolidate().validated == 0
    assert sorted(item.adopting_ops for item in strict.list_items()) == [(), ("relu",)]
