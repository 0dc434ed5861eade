"""What a mining run has done so far, in `<run dir>/mining.json`: each kernel's proposed variants and each
variant's verdict (and the item a lesson became), so a rerun with the same run id asks and judges nothing twice.

A JSON file beside the run's other records rather than a table: it belongs to the run (deleting the run directory
starts over, as for `kernelsage run`), it needs no migration, and only one process mines a run at a time."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.files import write_atomically
from kernelsage.mining.proposals import Variant
from kernelsage.mining.sources import KnownKernel
from kernelsage.mining.verdict import Judgement

LEDGER_NAME = "mining.json"


class Ledger:
    """The run's ledger, written through after every change (atomically: an interrupted write leaves the last)."""

    def __init__(self, path: Path, *, backend: str, namespace: str) -> None:
        self.path = path
        self.data: dict[str, Any] = {"backend": backend, "namespace": namespace, "kernels": {}}
        if path.is_file():
            try:
                stored = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ConfigurationError(f"{path}: not a mining ledger ({exc}); use a new --run-id") from exc
            for key in ("backend", "namespace"):
                if stored.get(key) != self.data[key]:
                    raise ConfigurationError(f"{path}: this run mined with {key} {stored.get(key)!r}, not "
                                             f"{self.data[key]!r}: use a new --run-id or the same {key}")
            self.data = stored

    def _entry(self, kernel: KnownKernel) -> dict[str, Any]:
        key = f"{kernel.task_id}:{kernel.sha256}"
        return self.data["kernels"].setdefault(key, {"task_id": kernel.task_id, "source_sha256": kernel.sha256,
                                                     "origin": kernel.origin, "judged": {}})

    def _save(self) -> None:
        write_atomically(self.path, json.dumps(self.data, indent=1, sort_keys=True))

    def proposals(self, kernel: KnownKernel) -> tuple[list[Variant], list[str]] | None:
        """The variants the model proposed for this kernel earlier (and the sections it could not read)."""
        entry = self._entry(kernel)
        if "proposed" not in entry:
            return None
        return [Variant(**v) for v in entry["proposed"]], list(entry.get("problems", []))

    def record_proposals(self, kernel: KnownKernel, variants: list[Variant], problems: list[str]) -> None:
        entry = self._entry(kernel)
        entry["proposed"], entry["problems"] = [asdict(v) for v in variants], problems
        self._save()

    def original(self, kernel: KnownKernel) -> str | None:
        """Why the known-good kernel itself was refused earlier ('' when it was found correct), None if unjudged."""
        return self._entry(kernel).get("original")

    def record_original(self, kernel: KnownKernel, problem: str) -> None:
        self._entry(kernel)["original"] = problem
        self._save()

    def judgement(self, kernel: KnownKernel, variant: Variant) -> tuple[Judgement, int | None] | None:
        found = self._entry(kernel)["judged"].get(variant.sha256)
        return None if found is None else (Judgement.from_dict(found["judgement"]), found.get("item_id"))

    def record_judgement(self, kernel: KnownKernel, variant: Variant, judgement: Judgement,
                         item_id: int | None = None) -> None:
        self._entry(kernel)["judged"][variant.sha256] = {"optimization": variant.optimization,
                                                         "judgement": judgement.to_dict(), "item_id": item_id}
        self._save()
