"""Near-duplicate experiences: which new experience says what a stored one (or an earlier one of the same
batch) already says, so the commit merges it there instead of storing the lesson again. Pure functions.

Two experiences say the same thing when they belong to the same operator family and either their texts
are identical (up to case and white space) or their embeddings' cosine similarity reaches
`SageParams.merge_similarity`. The family is the item's metadata "family" when given (e.g. the task's
category), else its operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from kernelsage.memory_backend.items import NewItem

MAX_PROVENANCES = 50  # provenances kept per item (the count goes on): a lesson learned a thousand times stays small


class Known(NamedTuple):
    """A stored experience a new one may be merged into."""

    item_id: int
    text: str
    family: str | None
    embedding: np.ndarray


def family(operator: str | None, metadata: dict) -> str | None:
    """The operator family an experience belongs to."""
    named = metadata.get("family")
    return named if isinstance(named, str) and named else operator


def same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def merge_targets(new: Sequence[NewItem], vectors: Sequence[np.ndarray], known: Sequence[Known],
                  threshold: float) -> list[int | None]:
    """For each new item: the index, among `known` followed by the new items themselves, of the experience it
    merges into (the most similar one that says the same thing, stored ones first), or None to store it.
    Only experiences merge; a new item merged into another cannot itself take merges."""
    pool = list(known)
    targets: list[int | None] = []
    for item, vector in zip(new, vectors, strict=True):
        target = None
        if item.kind == "experience":
            mine = family(item.operator, item.metadata)
            best = -2.0
            for k, other in enumerate(pool):
                if other.family != mine or (k >= len(known) and targets[k - len(known)] is not None):
                    continue
                similarity = cosine(vector, other.embedding)
                if (same_text(item.text, other.text) or similarity >= threshold) and similarity > best:
                    target, best = k, similarity
        targets.append(target)
        pool.append(Known(-1, item.text, family(item.operator, item.metadata), vector))
    return targets


def provenance(item: NewItem) -> dict:
    """What a merged experience adds to the one it merges into: where it came from and its evidence."""
    return {"source_episode": item.source_episode, "operator": item.operator, "evidence": item.evidence,
            "code_example": item.code_example}
