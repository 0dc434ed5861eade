"""The typed records an episode walks through: what the prompt shows, the pending candidate, each attempt,
the episode's outcome and its memory update.

Each is kept in the graph state as JSON made by its own serialisation (`as_state`) and read back through
it (`Model.model_validate`), so checkpointers, LangGraph Server and Studio see plain JSON while the
code works on types. The stream writes the same records to JSONL. Records from lower layers are used as
they are: `Exposure` (an adoption record), `Evaluation` (compile / verify / profile), `ConsolidationResult`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from kernelsage.graph.adoption_audit import AdoptionCheck
from kernelsage.memory_backend.items import ConsolidationResult
from kernelsage.memory_backend.records import Stage, Tier
from kernelsage.parsing import AdoptionRecord
from kernelsage.tools.results import Evaluation, Timing
from kernelsage.tools.timing import clearly_faster, clearly_faster_relative, faster_beyond_drift


class _Record(BaseModel):
    # Readers keep working when a newer version adds fields (records outlive the code that wrote them).
    model_config = ConfigDict(frozen=True, extra="ignore")


def as_state(record: BaseModel) -> dict[str, Any]:
    """A record as the JSON the state keeps."""
    return record.model_dump(mode="json")


class PromptItem(_Record):
    """A memory item as this round's prompt shows it: a hot rule or a retrieved cold item."""

    id: int
    tier: Tier
    relevance: float | None = None
    score: float | None = None
    text: str
    code_example: str | None = None


class PendingCandidate(_Record):
    """A parsed answer waiting for the adoption gate: its files and the model's declarations so far."""

    files: dict[str, str]
    adoption: dict[int, AdoptionRecord] = Field(default_factory=dict)
    asks: int = 0  # re-asks the gate needed
    prompt_tokens: int | None = None  # the writing prompt's tokens (the server's count, else an estimate)

    @property
    def adopted_ids(self) -> list[int]:
        return sorted(i for i, record in self.adoption.items() if record.adopted)


# Statuses of rounds that produced nothing to evaluate (the writer and the adoption gate set them).
ROUND_FAILURES = {
    "parse_error": "the answer broke the format after every re-ask",
    "truncated": "the answer was cut off at the output limit after every re-ask",
    "adoption_unresolved": "items were left without an adoption state after every re-ask",
    "model_error": "the model call failed (the reason is in the attempt's detail)",
}


class Recheck(_Record):
    """The best kernel so far profiled again right after a round that claimed to beat it: the timings that
    round is held against, taken in the same state of the machine."""

    round: int  # the best attempt's round
    candidate: Timing
    reference: Timing


class Attempt(_Record):
    """One round: the candidate written (if any) and what the backend said about it.

    A round that produced nothing to evaluate has no evaluation and says why in `detail`; its status is one
    of `ROUND_FAILURES`.
    """

    round: int
    stage: Stage
    status: str  # a backend Status value, or one of ROUND_FAILURES
    candidate_hash: str = ""
    files: dict[str, str] = Field(default_factory=dict)
    adopted: list[int] = Field(default_factory=list)  # ids the model adopted for this candidate (audit)
    evaluation: Evaluation | None = None
    detail: str = ""
    prompt_tokens: int | None = None  # the writing prompt's tokens (the server's count, else an estimate)
    rechecked: Recheck | None = None  # the best profiled again beside this round, when it claimed to beat it
    # Written by the tuning step (the tuned configuration of the kernel before it), not by the model; left out
    # of the JSON when False, so records of runs without tuning read as before.
    tuned: bool = Field(default=False, exclude_if=lambda tuned: not tuned)

    @property
    def evaluated(self) -> bool:
        return self.evaluation is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def compiled(self) -> bool:
        return self.evaluation is not None and self.evaluation.compiled

    @computed_field  # type: ignore[prop-decorator]
    @property
    def correct(self) -> bool:
        return self.evaluation is not None and self.evaluation.correct

    @computed_field  # type: ignore[prop-decorator]
    @property
    def latency(self) -> float | None:
        """Seconds per run of the candidate on the performance case, when correct and timed."""
        return self.evaluation.latency if self.evaluation else None

    @property
    def untimed(self) -> bool:
        """Profiled on a device that does not time (an interpreter): correct or not, no latency."""
        return self.evaluation is not None and self.evaluation.untimed

    @computed_field  # type: ignore[prop-decorator]
    @property
    def reference_latency(self) -> float | None:
        return self.evaluation.reference_latency if self.evaluation else None

    def _timings(self) -> tuple[Timing, Timing] | None:
        profile = self.evaluation.profile if self.evaluation else None
        if not self.correct or profile is None or profile.candidate is None or profile.reference is None:
            return None
        return profile.candidate, profile.reference

    def clearly_faster_than(self, other: Attempt) -> bool:
        """Faster than `other` beyond the measured noise (each relative to its own run's reference)."""
        mine, theirs = self._timings(), other._timings()
        return mine is not None and theirs is not None and clearly_faster_relative(*mine, *theirs)

    def faster_beyond_drift(self, other: Attempt) -> bool:
        """So much faster than `other` (`timing.BEYOND_DRIFT`) that no change of the machine explains it."""
        mine, theirs = self._timings(), other._timings()
        return mine is not None and theirs is not None and faster_beyond_drift(*mine, *theirs)

    def improves_on(self, best: Attempt) -> bool:
        """Clearly faster than `best`, and, where the best was profiled again beside this round (`rechecked`),
        also than that fresh measurement. The reference-relative time of one kernel moved 0.9x-1.9x between runs
        minutes apart on a shared machine: a change of the machine between two rounds is not an improvement."""
        if not self.clearly_faster_than(best):
            return False
        check, mine = self.rechecked, self._timings()
        if check is None or check.round != best.round or mine is None:
            return True  # no fresh measurement (its profile failed, or a record from before rechecks)
        return clearly_faster_relative(*mine, check.candidate, check.reference)

    def reference_comparison(self) -> int:
        """+1 when clearly faster than the reference, -1 when clearly slower, 0 when the noise hides it."""
        timings = self._timings()
        if timings is None:
            return 0
        candidate, reference = timings
        return 1 if clearly_faster(candidate, reference) else -1 if clearly_faster(reference, candidate) else 0


class EpisodeOutcome(_Record):
    """The episode's result, fixed before memory changes: what evaluation reads (latencies in seconds)."""

    task_id: str
    episode_id: str
    level: int | None = None
    solved: bool
    rounds: int
    candidates: int  # rounds that produced a candidate for the backend
    compiled: int
    correct_candidates: int = 0
    first_correct_round: int | None = None
    t_first: float | None = None
    t_best: float | None = None
    t_reference: float | None = None
    self_speedup: float | None = None  # t_first / t_best
    speedup: float | None = None  # t_reference / t_best; 1.0 when the measured noise hides the difference
    measured_speedup: float | None = None  # t_reference / t_best as measured, noise or not
    failure: str | None = None  # why the episode stopped before its budget was spent (e.g. the model failed)
    # The tuning step's records (kernelsage.tuning.TuningResult.to_dict(), or {"error": ...}); left out of the JSON
    # when empty, so records of runs without tuning read as before.
    tuning: list[dict[str, Any]] = Field(default_factory=list, exclude_if=lambda tuning: not tuning)

    @classmethod
    def of(cls, *, task_id: str, episode_id: str, level: int | None, rounds: int,
           attempts: list[Attempt], failure: str | None = None,
           tuning: list[dict[str, Any]] | None = None) -> EpisodeOutcome:
        """The outcome of these attempts: the first correct one and the best, where a later kernel replaces
        the best only when it is faster beyond the measured noise (`best_of`). A correct kernel that was not
        timed (an interpreter) solves the episode with no times and no speedups."""
        evaluated = [a for a in attempts if a.evaluated]
        correct = [a for a in evaluated if a.correct]
        first = correct[0] if correct else None
        best = best_of(correct)
        t_first = first.latency if first else None
        t_best = best.latency if best else None
        t_reference = best.reference_latency if best else None
        measured = t_reference / t_best if t_reference and t_best else None
        return cls(
            task_id=task_id, episode_id=episode_id, level=level, solved=first is not None, rounds=rounds,
            candidates=len(evaluated), compiled=sum(1 for a in evaluated if a.compiled),
            correct_candidates=len(correct), first_correct_round=first.round if first else None,
            t_first=t_first, t_best=t_best, t_reference=t_reference,
            self_speedup=t_first / t_best if t_first and t_best else None,
            speedup=measured if best is not None and best.reference_comparison() != 0 else
            (1.0 if measured is not None else None),
            measured_speedup=measured, failure=failure, tuning=tuning or [],
        )


def best_of(correct: list[Attempt]) -> Attempt | None:
    """The best of correct attempts in round order: a later one replaces the best only when it improves on it
    (clearly faster beyond the measured noise, also against the best measured again beside it), so noise never
    counts as improvement."""
    best: Attempt | None = None
    for attempt in correct:
        if best is None or attempt.improves_on(best):
            best = attempt
    return best


class MemoryUpdate(_Record):
    """What the curator did to the memory: the ATU credits, the new experiences, consolidation."""

    updated: bool = False  # False: no memory, a frozen memory, or an episode committed before
    policy: str = ""
    terminal_score: float | None = None
    credits: dict[int, float] = Field(default_factory=dict)
    new_items: list[int] = Field(default_factory=list)
    unstored: list[str] = Field(default_factory=list)  # experiences the database refused, each with why
    consolidation: ConsolidationResult | None = None
    adoption: str = "declared"  # what the credit counted as adopted: "declared", or "audited" (evidenced only)
    audit: list[AdoptionCheck] = Field(default_factory=list)  # each item declared adopted, checked against the code
