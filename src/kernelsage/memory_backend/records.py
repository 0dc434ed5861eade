"""Plain records the memory algorithms work on: no I/O, no clock, easy to build in a test."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

Tier = Literal["hot", "cold"]
Stage = Literal["draft", "refine"]
Lifecycle = Literal["cold", "validated", "hot"]


class ItemStats(NamedTuple):
    """The statistics of one memory item that the methods read and update.

    A NamedTuple rather than a dataclass: consolidation builds thousands per episode.
    """

    item_id: int
    utility: float = 0.0
    n_ret: int = 0  # episodes in which the item was shown (hot or cold)
    n_ret_cold: int = 0  # episodes in which it was retrieved from cold memory
    n_ado: int = 0  # episodes in which it was adopted
    adopting_ops: frozenset[str] = frozenset()
    access: float = 0.0  # p of a resident rule (EMA of adoption); cold items derive p from counts
    eligible_episodes: int = 0  # episodes during which it could be retrieved from cold memory
    state: Lifecycle = "cold"
    tokens: int = 1  # L: token length of the text that would be resident (the rule, once abstracted)
    q_draft: float = 0.0  # value-memory baseline, drafting stage
    q_refine: float = 0.0  # value-memory baseline, refining stage


class Exposure(BaseModel):
    """One item shown to the model in one round, with the model's declared adoption.

    The one record of this concept: the graph keeps it in its state (as JSON), the memory credits it,
    the stream writes it to the episode's JSONL record.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    item_id: int
    round: int
    tier: Tier
    stage: Stage = "draft"
    relevance: float | None = None
    score: float | None = None
    adopted: bool | None = None  # None = unresolved: the episode cannot be committed
    rationale: str = ""


@dataclass(frozen=True, kw_only=True)
class RoundOutcome:
    """What one candidate achieved: the evidence the value-memory baseline learns from."""

    round: int
    stage: Stage
    compiled: bool
    correct: bool
    latency: float | None = None  # seconds per run of the candidate when correct and profiled


@dataclass(frozen=True, kw_only=True)
class EpisodeTrace:
    """Everything the memory needs to credit one finished episode."""

    episode_id: str
    operator: str
    level: int | None = None
    policy: str = "sage"
    t_first: float | None = None  # latency of the first correct kernel; None when unsolved
    t_best: float | None = None  # latency of the best correct kernel
    exposures: tuple[Exposure, ...] = ()
    rounds: tuple[RoundOutcome, ...] = ()
    hot_version_seen: int | None = None
    metadata: dict[str, object] = field(default_factory=dict)

    @property
    def solved(self) -> bool:
        return self.t_first is not None


@dataclass(frozen=True, kw_only=True)
class PoolEntry:
    """A retrieval candidate: relevance from the vector search plus the statistics used to rerank."""

    item_id: int
    relevance: float
    utility: float = 0.0
    q_draft: float = 0.0
    q_refine: float = 0.0
    score: float | None = None
