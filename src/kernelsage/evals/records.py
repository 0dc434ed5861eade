"""Episode records: one JSON line per episode, written by the stream runner, read by metrics and reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelsage.errors import ConfigurationError
from kernelsage.files import write_atomically
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
    """One operator in a stream under one memory policy: the episode's outcome (with `tuning`, the tuning
    step's records, left out of the JSON when it did not run), every attempt (with its code and the backend's
    verdicts, for audits), every adoption record, the memory update, and the run."""

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


RUN_METADATA = "run.json"
HARNESS_ERROR = "harness_error"  # the prefix of the failure of an episode whose task could not be run


class HotRule(_Record):
    """A resident hot rule at the end of a run, with where it came from."""

    id: int
    text: str  # what every prompt shows: the abstracted rule, else the source text
    source_text: str = ""  # the experience or knowledge it was abstracted from
    kind: str = ""
    operator: str | None = None
    source_episode: str | None = None
    adopting_ops: list[str] = Field(default_factory=list)
    n_ado: int = 0
    utility: float = 0.0
    tokens: int = 0


class StreamStop(_Record):
    """Why a run stopped before its stream was done: the model failed episode after episode."""

    policy: str
    reason: str
    episodes: int  # the policy's episodes recorded when it stopped
    operators: int  # the operators its stream asked for
    not_run: list[str] = Field(default_factory=list)  # policies that never started

    def sentence(self) -> str:
        """The stop in one line, for the report, the summary and the command's last line."""
        rest = f"; policies not run: {', '.join(self.not_run)}" if self.not_run else ""
        return (f"the run stopped early: policy {self.policy} ran {self.episodes} of {self.operators} operators, "
                f"because {self.reason}{rest}")


class RunMetadata(_Record):
    """What a run directory's records do not say by themselves: how the run was made (kept in run.json,
    so a report written again later tells the same story)."""

    run_id: str
    model: str = ""
    replayed: bool = False  # the model's answers came from a recording, not from a model
    policies: list[str] = Field(default_factory=list)
    namespaces: dict[str, str] = Field(default_factory=dict)  # policy -> the namespace it learned in
    database: str = ""  # where the memory is (a data directory, or a URL without its password)
    frozen_memory: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # the memory hyperparameters set for the run (overrides)
    notes: list[str] = Field(default_factory=list)  # shown at the top of every report of the run
    hot_rules: dict[str, list[HotRule]] = Field(default_factory=dict)  # policy -> hot memory at the end
    endpoint: str = ""  # the model's base URL, when it has one
    stopped: StreamStop | None = None  # set when the run stopped before its stream was done

    def report_notes(self) -> list[str]:
        """What every report of the run says at the top: its notes, then why it stopped, if it did."""
        if self.stopped is None:
            return list(self.notes)
        sentence = self.stopped.sentence()
        return [*self.notes, sentence[0].upper() + sentence[1:] + "."]


def read_run_metadata(run_dir: Path | str) -> RunMetadata | None:
    """The run's run.json, or None when there is none (runs written before it existed)."""
    path = Path(run_dir) / RUN_METADATA
    if not path.is_file():
        return None
    try:
        return RunMetadata.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, OSError) as exc:
        raise ConfigurationError(f"{path}: unreadable run metadata ({exc}); move it aside to report without it") \
            from exc


def write_run_metadata(run_dir: Path | str, metadata: RunMetadata) -> Path:
    """Write run.json whole (through a temporary file, so a reader never sees half of it)."""
    path = Path(run_dir) / RUN_METADATA
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(metadata.model_dump(mode="json"), indent=1) + "\n")
    except OSError as exc:  # a read-only or misplaced run directory: one line, not a traceback
        raise ConfigurationError(f"cannot write {path}: {exc.strerror or exc}; give a writable --run-dir") from exc
    return path


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


def is_harness_error(record: EpisodeRecord) -> bool:
    """The harness, not the model, could not run this episode's task."""
    return bool(record.failure and record.failure.startswith(f"{HARNESS_ERROR}:"))


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

