"""Moving a memory between runs and models: one namespace as plain records, as a JSONL file, and back."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from kernelsage.errors import KernelsageError, NamespaceError, TransferFormatError
from kernelsage.memory_backend import item_rows, vector_index
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.database import transaction
from kernelsage.memory_backend.items import NamespaceInfo
from kernelsage.memory_backend.namespaces import (
    create_namespace,
    current_info,
    delete_namespace,
    namespace_info,
)
from kernelsage.memory_backend.vectors import checked_vector


class MemoryStore(Protocol):
    """What export and import use of a store.MemoryStore, which imports this module: its pool and index builds."""

    pool: ConnectionPool
    index_builds: vector_index.IndexBuilds

FORMAT = "kernelsage-memory"
FORMAT_VERSION = 2  # v2 ends with an "end" record: counts per record type and a SHA-256 of every line before it
READABLE_VERSIONS = (1, 2)  # v1 files (no end record) are still read, unverified
_DATETIME_KEYS = {"created_at", "updated_at", "promoted_at", "demoted_at", "abstracted_at", "committed_at", "at"}
_TABLES = {record_type: table for record_type, table, _ in q.EXPORT_TABLES}
_ITEM_REFERENCES = {"exposure", "credit", "hot_event"}

# -- records: every row of a namespace, in a stable order, and back ---------------------------------


def export_namespace(store: MemoryStore, name: str) -> Iterator[dict[str, Any]]:
    """Yield a namespace as plain records: its header, then items, episodes, exposures, credits, hot events."""
    with transaction(store.pool) as conn:
        info = namespace_info(conn, name)
        if info is None:
            raise NamespaceError(f"namespace {name!r} does not exist")
        yield {"type": "namespace", "name": info.name, "embedding_dim": info.embedding_dim,
               "embedding_model": info.embedding_model, "episode_seq": info.episode_seq,
               "hot_version": info.hot_version}
        for record_type, table, order in q.EXPORT_TABLES:
            cursor = conn.cursor(name=f"export_{record_type}")  # server-side: big namespaces stream
            cursor.execute(q.EXPORT_ITEMS if record_type == "item" else q.export_rows(table, order), (info.id,))
            for row in cursor:
                row.pop("namespace_id")
                if record_type == "item":
                    row["embedding"] = [float(x) for x in row["embedding"].to_numpy()]
                    row["adopting_ops"] = sorted(row["adopting_ops"])
                yield {"type": record_type, **row}


def import_namespace(store: MemoryStore, name: str, records: Iterator[dict[str, Any]]) -> NamespaceInfo:
    """Create namespace `name` from exported records, all in one transaction.

    The first record must be the namespace header. Item ids are reassigned; references follow them.
    """
    header = next(records, None)
    if header is None or header.get("type") != "namespace":
        raise NamespaceError("an import must start with the namespace record")
    with transaction(store.pool) as conn:
        if namespace_info(conn, name) is not None:
            raise NamespaceError(f"namespace {name!r} exists already: import into a new name or delete it first "
                                 f"(kernelsage memory delete {name})")
        info = create_namespace(conn, name, embedding_dim=header["embedding_dim"],
                                embedding_model=header["embedding_model"])
    try:
        with transaction(store.pool) as conn:
            ids: dict[int, int] = {}
            for record in records:
                _import_record(conn, info, record, ids)
            conn.execute(q.SET_COUNTERS, (header["episode_seq"], header["hot_version"], info.id))
            imported = current_info(conn, name)
    except Exception as exc:
        with transaction(store.pool) as conn:
            delete_namespace(conn, name)
        store.index_builds.drop_orphans()
        if isinstance(exc, (psycopg.Error, KeyError, TypeError)):
            raise NamespaceError(f"import into {name!r} failed and was rolled back: {exc}") from exc
        raise
    vector_index.maintain(store.pool, imported)  # an import of many items gets its index's lists at once
    return imported


def _import_record(conn: psycopg.Connection, info: NamespaceInfo, record: dict[str, Any],
                   ids: dict[int, int]) -> None:
    """Insert one exported record; `ids` maps exported item ids to the new ones."""
    record_type = record.pop("type")
    if record_type not in _TABLES:
        raise NamespaceError(f"unknown record type {record_type!r}")
    vector = None
    if record_type == "item":
        old = record.pop("id")
        ids[old] = item_rows.next_item_ids(conn, 1)[0]
        vector = checked_vector(record.pop("embedding"), info.embedding_dim, f"item {old}")
        record = {**record, "id": ids[old]}
        if isinstance(record.get("adopting_ops"), list):  # a set: the gate counts its members
            record["adopting_ops"] = sorted(set(record["adopting_ops"]))
    elif record_type in _ITEM_REFERENCES:
        if record["item_id"] not in ids:
            raise NamespaceError(f"{record_type} refers to item {record['item_id']}, which is not exported")
        record = {**record, "item_id": ids[record["item_id"]]}
    for key in ("metadata", "rounds", "params"):
        if key in record and not isinstance(record[key], Jsonb):
            record[key] = Jsonb(record[key])
    conn.execute(q.insert_row(_TABLES[record_type], ["namespace_id", *record]), [info.id, *record.values()])
    if vector is not None:
        conn.execute(q.INSERT_ITEM_VECTOR, (record["id"], info.id, vector))


# -- files ------------------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def export_jsonl(store: MemoryStore, namespace: str, path: Path) -> int:
    """Write a namespace to path (items, statistics, provenance, episodes); returns the record count.

    The last line is an "end" record with the count of each record type and a SHA-256 of every line
    before it, so an import refuses a file that was cut short or changed. Written to a temporary file
    first, so a failed export never leaves a truncated file behind.
    """
    if not path.parent.is_dir():
        raise TransferFormatError(f"cannot export to {path}: the directory {path.parent} does not exist; "
                                  "create it or choose another path")
    partial = path.with_name(path.name + ".partial")
    digest, counts = hashlib.sha256(), Counter[str]()
    try:
        with partial.open("w", encoding="utf-8") as out:
            for record in export_namespace(store, namespace):
                if record["type"] == "namespace":
                    record = {**record, "format": FORMAT, "format_version": FORMAT_VERSION}
                line = json.dumps(record, default=_json_default, sort_keys=True) + "\n"
                out.write(line)
                digest.update(line.encode("utf-8"))
                counts[record["type"]] += 1
            out.write(json.dumps({"type": "end", "counts": dict(sorted(counts.items())),
                                  "sha256": digest.hexdigest()}, sort_keys=True) + "\n")
        partial.replace(path)
    except OSError as exc:
        raise TransferFormatError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return sum(counts.values())


def _check_end(path: Path, number: int, record: dict[str, Any], counts: Counter[str], digest: str) -> None:
    if record.get("sha256") != digest:
        raise TransferFormatError(f"{path}:{number}: the checksum does not match the records before it: "
                                  "the file was changed or damaged; export it again")
    if record.get("counts") != dict(sorted(counts.items())):
        raise TransferFormatError(f"{path}:{number}: the file holds {dict(counts)} records, "
                                  f"the export wrote {record.get('counts')}")


def _read_records(path: Path) -> Iterator[dict[str, Any]]:
    digest, counts = hashlib.sha256(), Counter[str]()
    version, ended = None, False
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if ended:
                raise TransferFormatError(f"{path}:{number}: records after the end record")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TransferFormatError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or "type" not in record:
                raise TransferFormatError(f"{path}:{number}: a record must be an object with a 'type'")
            if number == 1:
                version = record.get("format_version")
                if record.get("format") != FORMAT or version not in READABLE_VERSIONS:
                    raise TransferFormatError(
                        f"{path}:1: not a {FORMAT} v{FORMAT_VERSION} export "
                        f"(found format={record.get('format')!r}, version={record.get('format_version')!r})"
                    )
                record = {k: v for k, v in record.items() if k not in ("format", "format_version")}
            if record["type"] == "end":
                _check_end(path, number, record, counts, digest.hexdigest())
                ended = True
                continue
            digest.update(line.encode("utf-8"))
            counts[record["type"]] += 1
            for key in _DATETIME_KEYS & record.keys():
                if record[key] is not None:
                    record[key] = datetime.fromisoformat(record[key])
            yield record
    if version != 1 and not ended:
        raise TransferFormatError(f"{path}: the file ends before its end record: it was cut short; export it again")


def import_jsonl(store: MemoryStore, path: Path, namespace: str | None = None) -> NamespaceInfo:
    """Load an exported file into a new namespace (default: the exported name). All or nothing."""
    if not path.is_file():
        raise TransferFormatError(f"{path}: no such file")
    records = _read_records(path)
    try:
        first = next(records)
    except StopIteration:
        raise TransferFormatError(f"{path}: the file is empty") from None
    target = namespace or first["name"]

    def all_records() -> Iterator[dict[str, Any]]:
        yield first
        yield from records

    try:
        return import_namespace(store, target, all_records())
    except TransferFormatError:
        raise
    except KernelsageError as exc:
        raise TransferFormatError(f"{path}: {exc}") from exc
