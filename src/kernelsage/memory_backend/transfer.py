"""Moving a memory between runs and models: one namespace as a JSONL file, and back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from kernelsage.errors import KernelsageError, TransferFormatError
from kernelsage.memory_backend.items import NamespaceInfo
from kernelsage.memory_backend.store import MemoryStore, export_namespace, import_namespace

FORMAT = "kernelsage-memory"
FORMAT_VERSION = 1
_DATETIME_KEYS = {"created_at", "updated_at", "promoted_at", "demoted_at", "abstracted_at", "committed_at", "at"}


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def export_jsonl(store: MemoryStore, namespace: str, path: Path) -> int:
    """Write a namespace to path (items, statistics, provenance, episodes); returns the record count.

    Written to a temporary file first, so a failed export never leaves a truncated file behind.
    """
    partial = path.with_name(path.name + ".partial")
    count = 0
    try:
        with partial.open("w", encoding="utf-8") as out:
            for record in export_namespace(store, namespace):
                if record["type"] == "namespace":
                    record = {**record, "format": FORMAT, "format_version": FORMAT_VERSION}
                out.write(json.dumps(record, default=_json_default, sort_keys=True) + "\n")
                count += 1
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def _read_records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TransferFormatError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
            if not isinstance(record, dict) or "type" not in record:
                raise TransferFormatError(f"{path}:{number}: a record must be an object with a 'type'")
            if number == 1:
                if record.get("format") != FORMAT or record.get("format_version") != FORMAT_VERSION:
                    raise TransferFormatError(
                        f"{path}:1: not a {FORMAT} v{FORMAT_VERSION} export "
                        f"(found format={record.get('format')!r}, version={record.get('format_version')!r})"
                    )
                record = {k: v for k, v in record.items() if k not in ("format", "format_version")}
            for key in _DATETIME_KEYS & record.keys():
                if record[key] is not None:
                    record[key] = datetime.fromisoformat(record[key])
            yield record


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
