"""Near-duplicate experiences: which new experience says what a stored one (or an earlier one of the same
batch) already says, so the commit merges it there instead of storing the lesson again. Pure functions.

Two experiences say the same thing when their texts are identical (up to case and white space), whatever
operators taught them, or when they belong to the same operator family and their embeddings' cosine
similarity reaches `SageParams.merge_similarity`. The family is the item's metadata "family" when given
(e.g. the task's category), else its operator.

Why identical texts merge across families: the text is what retrieval ranks and what the model reads, so
copies of one lesson are one item to both; stored apart they fill several of the k cold slots with the same
line and split its evidence (retrievals, adoptions, the distinct operators the validation gate counts, METHOD
§5) between copies that each gather less of it. A lesson taught on several operators is what the gate looks
for; the family only keeps apart *different* wordings that read alike (near duplicates by cosine), where a
word can carry what is specific to one family.
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


def says_the_same(text: str, item_family: str | None, other: Known, similarity: float, threshold: float) -> bool:
    """The merge rule: the same text (any family), or a cosine similarity of at least `threshold` within the
    same operator family."""
    return same_text(text, other.text) or (other.family == item_family and similarity >= threshold)


def merge_targets(new: Sequence[NewItem], vectors: Sequence[np.ndarray], known: Sequence[Known],
                  threshold: float) -> list[int | None]:
    """For each new item: the index, among `known` followed by the new items themselves, of the experience it
    merges into (of those that say the same thing, `says_the_same`: the same text first, then the most
    similar, stored ones before new ones), or None to store it. Only experiences merge; a new item merged
    into another cannot itself take merges."""
    pool = list(known)
    targets: list[int | None] = []
    for item, vector in zip(new, vectors, strict=True):
        target = None
        mine = family(item.operator, item.metadata)
        if item.kind == "experience":
            best = (False, -2.0)
            for k, other in enumerate(pool):
                if k >= len(known) and targets[k - len(known)] is not None:
                    continue
                similarity = cosine(vector, other.embedding)
                rank = (same_text(item.text, other.text), similarity)
                if says_the_same(item.text, mine, other, similarity, threshold) and rank > best:
                    target, best = k, rank
        targets.append(target)
        pool.append(Known(-1, item.text, mine, vector))
    return targets


def provenance(item: NewItem) -> dict:
    """What a merged experience adds to the one it merges into: where it came from (episode, operator and
    family, which may differ from the stored item's) and its evidence."""
    return {"source_episode": item.source_episode, "operator": item.operator,
            "family": family(item.operator, item.metadata), "evidence": item.evidence,
            "code_example": item.code_example}
