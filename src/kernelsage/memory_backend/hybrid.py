"""Hybrid retrieval: a lexical ranking by the names a query holds, fused with the vector ranking by
reciprocal-rank fusion (RRF) into the relevance pool that the policy reranks late.

Kernel errors are named things (an API such as DataCopyPad, an intrinsic such as _mm256_fmadd_ps, an
attribute): dense vectors place an item about `DataCopyPadV2` as near as one about `DataCopyPad`. The
lexical side matches the names exactly (ks_item_names keeps every name of an item whole and lower-cased,
migrations 7 and 8); only name-shaped words are kept and looked up, since common words match most items, cost a
read of each, and tell them apart worse than the vectors do. A name is written as a kernel engineer writes one:
a word with an underscore, a digit or a capital (`_mm256_fmadd_ps`, `float16`, `DataCopyPad`, `Muls`), and a
dotted or qualified chain as a whole (`tl.dot`, `AscendC::DataCopy`; `triton.language.dot` is `tl.dot`).
Names count by their rarity in the namespace (an IDF, `name_weights`): `AscendC`, in a third of the items,
must not tie that third with the one item that names the rare API beside it, and a capitalised prose word
(`The`, `Use`) is common, so it weighs nothing.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Hashable, Sequence

import psycopg

from kernelsage.memory_backend import item_rows
from kernelsage.memory_backend import queries as q
from kernelsage.memory_backend.items import MemoryItem, NamespaceInfo

# The same patterns and rule as ks_names in migration 8 (a test holds the two to one answer on random texts).
CHAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*")
QUALIFIER = re.compile(r"\.|::")
MAX_NAMES = 16  # names looked up per query: a long compiler log names many things, its first ones matter most
MIN_NAME_CHARS = 3
MAX_NAME_BYTES = 128  # longer names are kept as their hash: a B-tree entry holds at most about 2,700 bytes
# A namespace's items counted, at most: rarity among so many, a bounded read (an index-only count, 1.3 ms at
# 100K items). At 1,000 a name held by 1.4% of 10K lessons (an API each lesson about it names) counted as common
# and was left out: hybrid found no more than the vectors on such names.
COUNT_CAP = 20_000
COMMON_SHARE = 0.1  # a name held by more than this share of the counted items (and more than the pool) is common


def is_name(word: str) -> bool:
    """Whether one word (no qualifier) looks like a name in code rather than prose: it holds an underscore, a
    digit or a capital (DataCopyPad, _mm256_fmadd_ps, float16, Muls; not error, scope)."""
    return len(word) >= MIN_NAME_CHARS and any(c == "_" or c.isdigit() or c.isupper() for c in word)


def _distinctive(word: str) -> bool:
    """A name unlike a capitalised prose word: an underscore, a digit or a capital after its first letter."""
    return "_" in word or any(c.isdigit() for c in word) or any(c.isupper() for c in word[1:])


def name_key(name: str) -> str:
    """How the index keeps a name: lower-cased, and past MAX_NAME_BYTES its SHA-256 (as ks_name_key does)."""
    name = name.lower()
    if len(name.encode("utf-8")) <= MAX_NAME_BYTES:
        return name
    return "sha256:" + hashlib.sha256(name.encode("utf-8")).hexdigest()


def names_of(text: str) -> list[tuple[str, bool]]:
    """Every name of a text, first seen first, with whether it is distinctive (a qualified chain, or a word
    unlike a capitalised prose word): each qualified chain whole (`triton.language.` written `tl.`), then its
    name-shaped parts."""
    found: list[tuple[str, bool]] = []
    for chain in CHAIN.findall(text):
        if chain.startswith("triton.language."):
            chain = "tl." + chain[len("triton.language."):]
        if QUALIFIER.search(chain):
            found.append((chain, True))
        found += [(part, _distinctive(part)) for part in QUALIFIER.split(chain) if is_name(part)]
    return found


def query_names(text: str, limit: int = MAX_NAMES) -> list[str]:
    """The names of a query as the index keys them, distinctive ones first (a capitalised prose word such as
    `Error` must not push an API out of the `limit`), each group first seen first."""
    found = names_of(text)
    ordered = [name for name, distinctive in found if distinctive] + [name for name, distinctive in found
                                                                      if not distinctive]
    return list(dict.fromkeys(name_key(name) for name in ordered))[:limit]


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
