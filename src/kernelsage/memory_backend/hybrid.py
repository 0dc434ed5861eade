"""Hybrid retrieval: a lexical ranking by the names a query holds, fused with the vector ranking by
reciprocal-rank fusion (RRF) into the relevance pool that the policy reranks late.

Kernel errors are named things (an API such as DataCopyPad, an intrinsic such as _mm256_fmadd_ps, an
attribute): dense vectors place an item about `DataCopyPadV2` as near as one about `DataCopyPad`. The
lexical side matches the names exactly (migration 5 keeps every word of an item as a whole, lower-cased
name in ks_item_names, migration 7); only name-shaped words are kept and looked up, since common words match
most items, cost a read of each, and tell them apart worse than the vectors do. Names count by their rarity
in the namespace (an IDF, `name_weights`): `AscendC`, in a third of the items, must not tie that third
with the one item that names the rare API beside it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence

import psycopg

from kernelsage.memory_backend import item_rows
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.items import MemoryItem, NamespaceInfo

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # the same pattern and rule as ks_names in migration 7
MAX_NAMES = 16  # names looked up per query: a long compiler log names many things, its first ones matter most
MIN_NAME_CHARS = 3
COUNT_CAP = 1000  # a namespace's items counted, at most: rarity among so many, a bounded read
COMMON_SHARE = 0.1  # a name held by more than this share of the counted items (and more than the pool) is common


def is_name(word: str) -> bool:
    """Whether a word looks like a name in code rather than prose: it holds an underscore or a digit, or a
    capital after its first letter (DataCopyPad, _mm256_fmadd_ps, float16, TQue; not error, scope, The)."""
    return len(word) >= MIN_NAME_CHARS and ("_" in word or any(c.isdigit() for c in word)
                                            or any(c.isupper() for c in word[1:]))


def query_names(text: str, limit: int = MAX_NAMES) -> list[str]:
    """The name-shaped words of a query, lower-cased as the index holds them, first seen first."""
    names = dict.fromkeys(w.lower() for w in WORD.findall(text) if is_name(w))
    return list(names)[:limit]


def name_weights(counts: Sequence[int], items: int, pool: int, common_share: float = COMMON_SHARE) -> list[float]:
    """The weight of each name in the lexical ranking, from the items holding it (`counts`) among the
    namespace's `items` (counted up to COUNT_CAP; a name's items only up to one past common): its IDF,
    log(items / count). 0, leaving the name out of the lexical query, for a name no item holds and for a
    common one, held by more than `common_share` of the items and by more than the `pool` can take (its items
    would fill the pool in arbitrary order, and reading them costs most); a name every item holds weighs 0."""
    return [math.log(items / n) if 0 < n <= max(common_share * items, pool) else 0.0 for n in counts]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hashable]], k: int, size: int) -> list[tuple[Hashable, float]]:
    """RRF: each key scores the sum over rankings of 1 / (k + rank), rank counted from 1; the `size` best,
    best first, ties by first appearance (the earlier ranking, then the earlier rank). Scores are divided
    by the best possible one (first in every ranking), so they lie in (0, 1]."""
    if k < 1 or size < 0:
        raise ValueError(f"reciprocal_rank_fusion needs k >= 1 and size >= 0, not k={k}, size={size}")
    scores: dict[Hashable, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(dict.fromkeys(ranking), start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    best = len(rankings) / (k + 1) if rankings else 1.0
    ordered = sorted(scores.items(), key=lambda pair: -pair[1])  # stable: first appearance breaks ties
    return [(key, score / best) for key, score in ordered[:size]]


def lexical_pool(conn: psycopg.Connection, info: NamespaceInfo, names: Sequence[str], size: int, *,
                 exclude_resident: bool) -> list[MemoryItem]:
    """The `size` items whose documents hold the rarest of these names (the sum of `name_weights` of the
    names each holds), best first, then by id. Two statements: the names' counts, then the ranking by the
    names that weigh; none when no name does."""
    if not names:
        return []
    counted = conn.execute(q.LEXICAL_NAME_COUNTS, {"names": list(names), "ns": info.id,
                                                   "cap": COUNT_CAP, "share": COMMON_SHARE, "pool": size}).fetchall()
    weights = name_weights([r["df"] for r in counted], counted[0]["items"], size)
    kept = [(n, w) for n, w in zip(names, weights, strict=True) if w > 0]
    if not kept:
        return []
    rows = conn.execute(q.LEXICAL_ITEMS, {"ns": info.id, "n": size, "names": [n for n, _ in kept],
                                          "weights": [w for _, w in kept], "exclude": exclude_resident}).fetchall()
    return [item_rows.to_item({k: v for k, v in r.items() if k != "rank"}) for r in rows]


def fuse_pools(vector: list[tuple[MemoryItem, float]], lexical: list[MemoryItem], k: int,
               size: int) -> list[tuple[MemoryItem, float]]:
    """The fused relevance pool, its relevance the normalised RRF score. Without lexical matches the vector
    pool stands as it is, with its cosine similarities: hybrid changes nothing for a query naming nothing."""
    if not lexical:
        return vector[:size]
    by_id = {item.id: item for item, _ in vector} | {item.id: item for item in lexical}
    fused = reciprocal_rank_fusion([[item.id for item, _ in vector], [item.id for item in lexical]], k, size)
    return [(by_id[key], score) for key, score in fused]  # type: ignore[index]  # keys are the item ids
