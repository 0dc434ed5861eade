"""What the store hands out and takes in: memory items, retrieval results, commit and consolidation reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kernelsage.memory_backend.records import Lifecycle, Tier


@dataclass(frozen=True, kw_only=True)
class NewItem:
    """An experience or knowledge item to store; the embedding is computed when not given."""

    text: str  # the retrieval-facing rule text
    evidence: str = ""
    code_example: str | None = None
    operator: str | None = None
    source_episode: str | None = None
    kind: str = "experience"  # experience | knowledge | rule
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: list[float] | None = None


@dataclass(frozen=True, kw_only=True)
class MemoryItem:
    """One stored item with its statistics, lifecycle and provenance."""

    id: int
    kind: str
    text: str
    evidence: str
    code_example: str | None
    operator: str | None
    source_episode: str | None
    rule_text: str | None
    tokens: int
    rule_tokens: int | None
    utility: float
    n_ret: int
    n_ret_cold: int
    n_ado: int
    adopting_ops: tuple[str, ...]
    access: float
    q_draft: float
    q_refine: float
    state: Lifecycle
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    promoted_at: datetime | None
    demoted_at: datetime | None

    @property
    def provenance(self) -> str:
        """Where the item came from: see `provenance_of`."""
        return provenance_of(self.metadata.get("provenance"), self.kind, self.source_episode is not None)

    @property
    def resident_text(self) -> str:
        """What the model sees: the abstracted rule once there is one, else the source text."""
        return self.rule_text or self.text

    @property
    def resident_tokens(self) -> int:
        return self.rule_tokens if self.rule_tokens is not None else self.tokens


def provenance_of(declared: str | None, kind: str, from_episode: bool) -> str:
    """An item's origin for display and counts: the provenance its writer declared (mined lessons say "mined"),
    else "knowledge" for a knowledge pack's items, "episode" for what an episode taught, else its kind."""
    if declared:
        return str(declared)
    if kind == "knowledge":
        return "knowledge"
    return "episode" if from_episode else kind


@dataclass(frozen=True, kw_only=True)
class ShownItem:
    """An item shown to the model this round: from hot memory or retrieved from cold memory."""

    item: MemoryItem
    tier: Tier
    relevance: float | None = None
    score: float | None = None


@dataclass(frozen=True, kw_only=True)
class Retrieval:
    cold: list[ShownItem]
    hot: list[ShownItem]
    hot_version: int

    @property
    def shown(self) -> list[ShownItem]:
        return [*self.hot, *self.cold]


@dataclass(frozen=True, kw_only=True)
class CommitResult:
    episode_id: str
    applied: bool  # False when this episode had been committed before: nothing changed
    terminal_score: float
    credits: dict[int, float]
    new_item_ids: list[int] = field(default_factory=list)  # experiences stored with the episode
    merged_into: list[int] = field(default_factory=list)  # stored items that near-duplicate experiences merged into
    # (credit, utility before, utility after) per item as stored in the credit audit (read back for a repeat):
    # what Memory.episode_credits returns, without another transaction
    stored_credits: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    # why each experience the database refused was left out (the episode and its credits were recorded)
    unstored: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ConsolidationResult:
    hot_version: int
    hot: tuple[int, ...]
    promoted: tuple[int, ...]
    demoted: tuple[int, ...]
    validated: int
    abstracted: int
    tokens_used: int
    budget: int


@dataclass(frozen=True, kw_only=True)
class NamespaceInfo:
    id: int
    name: str
    embedding_dim: int
    embedding_model: str
    episode_seq: int
    hot_version: int
    created_at: datetime
