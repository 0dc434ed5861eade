"""Episode records: one JSON line per episode, written by the stream runner, read by metrics and reports."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelsage.errors import ConfigurationError
from kernelsage.graph.records import Attempt, EpisodeOutcome, MemoryUpdate
from kernelsage.memory_backend.records import Exposure


class _Record(BaseModel):
    # Readers must keep working when a newer runner adds fields.
    model_config = ConfigDict(extra="ignore")


class StateCounts(_Record):
    cold: int = 0
    validated: int = 0
    hot: int = 0


class MemorySnapshot(_Record):
    """The memory as it stands after the episode."""

    by_state: StateCounts = Field(default_factory=StateCounts)
    hot_tokens: int = 0
    utilities: list[float] = Field(default_factory=list)
    hot_kinds: dict[str, int] = Field(default_factory=dict)


class TokenUsage(_Record):
    input: int = 0
    output: int = 0


class EpisodeRecord(EpisodeOutcome):
    """One operator in a stream under one memory policy: the episode's outcome, every attempt (with its
    code and the backend's verdicts, for audits), every adoption record, the memory update, and the run."""

    run_id: str
    policy: str
    model: str
    backend: str
    namespace: str
    position: int
    category: str = ""
    attempts: list[Attempt] = Field(default_factory=list)
    adoption: list[Exposure] = Field(default_factory=list)
    memory: MemoryUpdate = Field(default_factory=MemoryUpdate)
    memory_after: MemorySnapshot | None = None
    seconds: float = 0.0
    tokens: TokenUsage = Field(default_factory=TokenUsage)


def read_records(path: Path | str) -> list[EpisodeRecord]:
    """Read a JSONL file of episode records in file order; blank lines are skipped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read episode records from {path}: {exc.strerror or exc}") from exc
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(EpisodeRecord.model_validate_json(line))
        except ValidationError as exc:
            raise ConfigurationError(f"{path}:{number}: malformed episode record: {_describe(exc)}") from exc
    return records


def group_by_policy(records: list[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    """Split records by policy, keeping the order in which policies first appear."""
    groups: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        groups.setdefault(record.policy, []).append(record)
    return groups


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error["loc"])
        problems.append(f"{where}: {error['msg']}" if where else error["msg"])
    more = exc.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")

