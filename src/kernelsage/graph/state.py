"""The episode state: what one task's LangGraph run carries from node to node.

Records are stored as their own JSON (see `records.py`), so any checkpointer and LangGraph Server can
store and show them; the readers below turn them back into types. Lists that grow over the episode use
reducers; the prompt history is never stored, each prompt is rebuilt from the few recent attempts it needs.

Extend it by subclassing (`class MyState(EpisodeState): audit: list[str]`) and passing the subclass to
`build_graph(state_schema=...)`.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel
from typing_extensions import NotRequired, TypedDict

from kernelsage.graph.records import Attempt, EpisodeOutcome, MemoryUpdate, PendingCandidate, PromptItem
from kernelsage.memory_backend.records import Exposure, Stage

Json = dict[str, Any]
R = TypeVar("R", bound=BaseModel)


class EpisodeState(TypedDict):
    task_id: str
    episode_id: NotRequired[str]
    operator: NotRequired[str]
    level: NotRequired[int | None]
    stage: NotRequired[Stage]
    round: NotRequired[int]  # candidates written so far
    budget: NotRequired[int]
    early_stop_speedup: NotRequired[float | None]
    tuning_budget: NotRequired[int]  # compiles plus profiles the tuning step may spend; 0: it does not run
    hot_version: NotRequired[int | None]
    shown: NotRequired[list[Json]]  # PromptItem: this round's items, replaced at each retrieval
    pending: NotRequired[Json | None]  # PendingCandidate
    adoption: NotRequired[Annotated[list[Json], operator.add]]  # Exposure, one per shown item per round
    attempts: NotRequired[Annotated[list[Json], operator.add]]  # Attempt
    first_correct: NotRequired[Json | None]  # Attempt
    best: NotRequired[Json | None]  # Attempt
    diagnosis: NotRequired[str | None]
    tuning: NotRequired[Annotated[list[Json], operator.add]]  # TuningResult.to_dict(), or {"error": ...}
    result: NotRequired[Json | None]  # EpisodeOutcome, written by `finish` before memory changes
    memory_update: NotRequired[Json | None]  # MemoryUpdate, written by `curator`


def stage_of(state: EpisodeState) -> Stage:
    return state.get("stage", "draft")


def shown_items(state: EpisodeState) -> list[PromptItem]:
    return [PromptItem.model_validate(item) for item in state.get("shown") or []]


def _one(record: type[R], value: Json | None) -> R | None:
    return record.model_validate(value) if value is not None else None


def pending_candidate(state: EpisodeState) -> PendingCandidate | None:
    return _one(PendingCandidate, state.get("pending"))


def exposures(state: EpisodeState) -> list[Exposure]:
    return [Exposure.model_validate(entry) for entry in state.get("adoption") or []]


def attempts(state: EpisodeState) -> list[Attempt]:
    return [Attempt.model_validate(entry) for entry in state.get("attempts") or []]


def first_correct(state: EpisodeState) -> Attempt | None:
    return _one(Attempt, state.get("first_correct"))


def best_attempt(state: EpisodeState) -> Attempt | None:
    return _one(Attempt, state.get("best"))


def episode_outcome(state: EpisodeState) -> EpisodeOutcome | None:
    return _one(EpisodeOutcome, state.get("result"))


def memory_update(state: EpisodeState) -> MemoryUpdate | None:
    return _one(MemoryUpdate, state.get("memory_update"))
