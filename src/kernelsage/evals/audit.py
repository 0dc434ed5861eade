"""The adoption audit of a run, from its episode records: per policy and per item, the adoptions the model
declared, those the written code showed (`graph.adoption_audit`, checked by the curator) and how often the
two agree. `kernelsage memory audit --run ID` prints it; the report shows each policy's agreement rate."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.evals.metrics import Ratio, deduplicate
from kernelsage.evals.records import EpisodeRecord, read_records


@dataclass
class ItemAudit:
    """One item over a policy's episodes: declared adoptions, evidenced ones, the cues that showed it."""

    item_id: int
    declared: int = 0
    evidenced: int = 0
    cues: int = 0
    matched: Counter[str] = field(default_factory=Counter)
    reason: str = ""  # why the latest unevidenced declaration was not evidenced

    @property
    def agreement(self) -> Ratio:
        return Ratio(self.evidenced, self.declared)

    def to_dict(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "declared": self.declared, "evidenced": self.evidenced,
                "agreement": self.agreement.to_dict(), "cues": self.cues,
                "matched": [name for name, _ in self.matched.most_common(8)], "reason": self.reason}


@dataclass
class PolicyAudit:
    """A policy's episodes: the adoption mode it credited, and its items' audits (by id)."""

    policy: str
    episodes: int = 0
    modes: set[str] = field(default_factory=set)
    unaudited: int = 0  # episodes that declared adoptions but carry no audit (records written before audits)
    items: dict[int, ItemAudit] = field(default_factory=dict)

    @property
    def declared(self) -> int:
        return sum(item.declared for item in self.items.values())

    @property
    def evidenced(self) -> int:
        return sum(item.evidenced for item in self.items.values())

    @property
    def agreement(self) -> Ratio:
        return Ratio(self.evidenced, self.declared)

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "episodes": self.episodes, "adoption": sorted(self.modes),
                "declared": self.declared, "evidenced": self.evidenced, "agreement": self.agreement.to_dict(),
                "unaudited_episodes": self.unaudited,
                "items": [self.items[i].to_dict() for i in sorted(self.items)]}


def audit_policy(policy: str, records: Sequence[EpisodeRecord]) -> PolicyAudit:
    """Sum the audits of a policy's records (a task run twice counts once, by its last record)."""
    audit = PolicyAudit(policy=policy)
    for record in deduplicate(records):
        audit.episodes += 1
        if record.memory.policy:
            audit.modes.add(record.memory.adoption)
        if not record.memory.audit and any(e.adopted for e in record.adoption):
            audit.unaudited += 1
        for check in record.memory.audit:
            item = audit.items.setdefault(check.item_id, ItemAudit(item_id=check.item_id))
            item.declared += 1
            item.cues = max(item.cues, check.cues)
            if check.evidenced:
                item.evidenced += 1
                item.matched.update(check.matched)
            else:
                item.reason = check.reason
    return audit


def audit_records(records_by_policy: Mapping[str, Sequence[EpisodeRecord]]) -> dict[str, PolicyAudit]:
    return {policy: audit_policy(policy, records) for policy, records in records_by_policy.items()}


def read_run_records(run_dir: Path, run_id: str) -> dict[str, list[EpisodeRecord]]:
    """A run directory's records by policy; a missing directory or one without records is a one-line error."""
    if not run_dir.is_dir():
        raise ConfigurationError(f"run {run_id!r}: no run directory {run_dir} (runs are kept in runs/<run id>; "
                                 "give --run-dir where it was written elsewhere)")
    files = sorted(run_dir.glob("*.jsonl"))
    if not files:
        raise ConfigurationError(f"run {run_id!r}: {run_dir} holds no <policy>.jsonl episode records")
    return {path.stem: read_records(path) for path in files}
