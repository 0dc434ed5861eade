"""The episode state: what one task's LangGraph run carries from node to node.

Plain JSON-ready dicts, so any checkpointer and LangGraph Server can store and show them.
Lists that grow over the episode use reducers; the prompt history is never stored, each prompt is
rebuilt from the few recent attempts it needs.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

from typing_extensions import NotRequired, TypedDict

Stage = Literal["draft", "refine"]


class ShownItem(TypedDict):
    """A memory item shown to the model this round."""

    id: int
    tier: Literal["hot", "cold"]
    relevance: float | None
    score: float | None
    text: str
    code_example: str | None


class AdoptionEntry(TypedDict):
    """The model's declared use of one shown item in one round."""

    item_id: int
    tier: Literal["hot", "cold"]
    round: int
    stage: Stage
    adopted: bool
    rationale: str
    relevance: float | None
    score: float | None


class Attempt(TypedDict):
    """One candidate and what the backend said about it."""

    round: int
    stage: Stage
    candidate_hash: str
    files: dict[str, str]
    status: str  # a backend Status value, or parse_error / adoption_unresolved
    correct: bool
    latency: float | None  # seconds per run of the candidate, when profiled
    reference_latency: float | None
    compile: dict[str, Any] | None
    verify: dict[str, Any] | None
    profile: dict[str, Any] | None
    adopted: list[int]  # ids the model adopted for this candidate (for the adoption audit)


class PendingCandidate(TypedDict):
    """A parsed answer waiting for the adoption gate."""

    files: dict[str, str]
    adoption: dict[str, dict[str, Any]]  # str(item id) -> {"adopted", "rationale"}
    asks: int


class EpisodeState(TypedDict):
    task_id: str
    episode_id: NotRequired[str]
    operator: NotRequired[str]
    level: NotRequired[int | None]
    stage: NotRequired[Stage]
    round: NotRequired[int]  # candidates written so far
    budget: NotRequired[int]
    early_stop_speedup: NotRequired[float | None]
    hot_version: NotRequired[int | None]
    shown: NotRequired[list[ShownItem]]  # this round's items, replaced at each retrieval
    pending: NotRequired[PendingCandidate | None]
    adoption: NotRequired[Annotated[list[AdoptionEntry], operator.add]]
    attempts: NotRequired[Annotated[list[Attempt], operator.add]]
    first_correct: NotRequired[Attempt | None]
    best: NotRequired[Attempt | None]
    diagnosis: NotRequired[str | None]
    outcome: NotRequired[dict[str, Any] | None]
