"""Level 3: matmul variants, batched and grouped matmul, attention, top-k.

The cases make every attribute and branch matter (issue 30, point 5): dimensions that are no multiple of a
tile and tiny ones, attributes that differ between cases, empty groups first, inside and last, attention
scores large enough that exp overflows unless the row's maximum is subtracted, k equal to n, ids at both
ends of the table. Top-k states its rule for equal values (the lower index first) and has cases of ties; the
router's logits stay distinct (its ranking is of computed probabilities, where two kernels may round equal
logits apart).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernelsage.tasks.generators import randint, randn, tied
from kernelsage.tasks.model import Tolerance, case, define_task

# k = 65 is one past a multiple of 64 and of 32 (common k tiles): a kernel that drops or repeats the last step of
# its k loop shows only there.
MATMUL_CASES = [case("square", m=64, k=64, n=64), case("odd", m=33, k=127, n=65), case("thin", m=1, k=300, n=17),
                case("tail", m=5, k=7, n=3), case("k_tail", m=9, k=65, n=20)]
PERF_MATMUL = case("perf", m=512, k=512, n=512)
# Long dot products accumulate rounding differently in any two correct orders.
MATMUL_TOLERANCE = {"float32": Tolerance(2e-3, 2e-3)}


def _ab(c, g, transpose_b=False):
    b_shape = (c["n"], c["k"]) if transpose_b else (c["k"], c["n"])
    return {"a": randn((c["m"], c["k"]), c.dtype, g), "b": randn(b_shape, c.dtype, g)}


def _grouped_inputs(c, g):
    """Group sizes drawn at random; the groups the case names as `empty` get none."""
    groups, tokens = c["groups"], c["tokens"]
    weights = torch.ones(groups)
    weights[list(c.get("empty", ()))] = 0.0
    sizes = torch.multinomial(weights, tokens, replacement=True, generator=g).bincount(minlength=groups)
    return {"x": randn((tokens, c["k"]), c.dtype, g), "weight": randn((groups, c["k"], c["n"]), c.dtype, g, 0.1),
            "group_sizes": sizes.to(torch.int64)}


def _grouped_matmul(x, weight, group_sizes):
    pieces, start = [], 0
    for group, size in enumerate(group_sizes.tolist()):
        pieces.append(x[start:start + size] @ weight[group])
        start += size
    return torch.cat(pieces)


def _attention_inputs(c, g):
    """q and k scaled by the case's `scale` (5: scores in the hundreds, beyond exp's float32 range)."""
    shape, scale = (c["b"], c["h"], c["s"], c["d"]), c.get("scale", 1.0)
    return {"q": randn(shape, c.dtype, g, scale), "k": randn(shape, c.dtype, g, scale), "v": randn(shape, c.dtype, g)}


def _attention(q, k, v, causal):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, -1) @ v


TIE_EXACT_ELEMENTS = 1 << 16


def _topk_inputs(c, g):
    """Distinct values per row, or (case `ties`) values on a coarse grid: equal values inside the top k and
    across its boundary."""
    if c.get("ties"):
        return {"x": tied((c["rows"], c["n"]), c.dtype, g)}
    return {"x": distinct_rows(c["rows"], c["n"], c.dtype, g, 3.0)}


def distinct_rows(rows: int, n: int, dtype: str, generator: torch.Generator, spread: float) -> torch.Tensor:
    """Rows of n distinct values in [-spread, spread), randomly ordered: top-k has no ties to break."""
    ranks = torch.rand((rows, n), generator=generator).argsort(-1).to(torch.float64)
    return (ranks / n * 2.0 - 1.0).mul(spread).to(getattr(torch, dtype))


def _topk(x, k):
    """Largest first, the lower index first among equal values. torch.topk promises no order among equal
    values, so inputs up to TIE_EXACT_ELEMENTS (every correctness case) are ranked by a stable sort; the
    performance case's rows are distinct, where the two agree, and torch.topk keeps the timed reference
    PyTorch's own operator."""
    if x.numel() <= TIE_EXACT_ELEMENTS:
        ranked = torch.sort(x, dim=-1, descending=True, stable=True)
        return ranked.values[..., :k].contiguous(), ranked.indices[..., :k].contiguous()
    result = torch.topk(x, k, dim=-1, largest=True, sorted=True)
    return result.values, result.indices


def _router(logits, k):
    probs = torch.softmax(logits, -1)
    result = torch.topk(probs, k, dim=-1, sorted=True)
    return result.values / result.values.sum(-1, keepdim=True), result.indices


def _mlp_inputs(c, g):
    return {"x": randn((c["m"], c["d"]), c.dtype, g), "w1": randn((c["d"], c["h"]), c.dtype, g, 0.1),
            "b1": randn((c["h"],), c.dtype, g, 0.1), "w2": randn((c["h"], c["d"]), c.dtype, g, 0.1),
            "b2": randn((c["d"],), c.dtype, g, 0.1)}


def _embedding_inputs(c, g):
    """A table and ids, a fifth of them the first or the last row of the table (an off-by-one bound shows)."""
    ids = randint((c["bags"], c["per_bag"]), 0, c["vocab"], g)
    ends = torch.where(torch.rand(ids.shape, generator=g) < 0.5, 0, c["vocab"] - 1)
    ids = torch.where(torch.rand(ids.shape, generator=g) < 0.2, ends, ids)
    return {"table": randn((c["vocab"], c["d"]), c.dtype, g), "ids": ids}


ATTENTION_CASES = [case("small", b=1, h=2, s=16, d=32), case("odd", b=2, h=3, s=37, d=24),
                   case("sharp", b=1, h=2, s=19, d=16, scale=5.0), case("single", b=1, h=1, s=1, d=8)]
PERF_ATTENTION = case("perf", b=2, h=8, s=256, d=64)
TOPK_CASES = [case("rows", rows=32, n=200, k=5), case("k1", rows=9, n=77, k=1), case("wide", rows=4, n=3000, k=16),
              case("all", rows=3, n=13, k=13), case("one_row", rows=1, n=1029, k=7),
              case("ties", rows=16, n=100, k=7, ties=True), case("ties_all", rows=4, n=9, k=9, ties=True)]

TASKS = [
    define_task(
        id="l3_matmul", level=3, category="matmul",
        description="Matrix product c = a @ b. Inputs a [m, k], b [k, n]; output c [m, n].",
        reference=torch.matmul, inputs=_ab, cases=MATMUL_CASES, perf=PERF_MATMUL, tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_matmul_bt", level=3, category="matmul",
        description="Matrix product with transposed b: c = a @ b^T. Inputs a [m, k], b [n, k]; output c [m, n].",
        reference=lambda a, b: a @ b.T, inputs=lambda c, g: _ab(c, g, transpose_b=True),
        cases=MATMUL_CASES, perf=PERF_MATMUL, tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_addmm", level=3, category="matmul",
        description="GEMM with scaling: out = beta * c + alpha * (a @ b). Inputs a [m, k], b [k, n], c [m, n]; "
                    "output out [m, n]; attributes alpha, beta (floats), which differ from case to case.",
        reference=lambda a, b, c, alpha, beta: torch.addmm(c, a, b, beta=beta, alpha=alpha),
        inputs=lambda c, g: {**_ab(c, g), "c": randn((c["m"], c["n"]), c.dtype, g)},
        attrs=lambda c: {"alpha": {"odd": -1.25, "thin": 2.0}.get(c.name, 0.5),
                         "beta": {"odd": 0.3, "thin": -1.0}.get(c.name, 2.0)}, cases=MATMUL_CASES, perf=PERF_MATMUL,
        tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_bmm", level=3, category="batched_matmul",
        description="Batched matrix product: c[i] = a[i] @ b[i]. Inputs a [batch, m, k], b [batch, k, n]; output "
                    "c [batch, m, n].",
        reference=torch.bmm,
        inputs=lambda c, g: {"a": randn((c["batch"], c["m"], c["k"]), c.dtype, g),
                             "b": randn((c["batch"], c["k"], c["n"]), c.dtype, g)},
        cases=[case("small", batch=4, m=32, k=48, n=16), case("odd", batch=3, m=17, k=65, n=31),
               case("tail", batch=2, m=5, k=3, n=7), case("blocks", batch=3, m=70, k=20, n=40)],
        perf=case("perf", batch=16, m=256, k=128, n=256), tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_grouped_matmul", level=3, category="grouped_matmul",
        description="Grouped matmul (as in mixture-of-experts layers): the rows of x are split into consecutive "
                    "groups of sizes group_sizes[0..G-1] (they sum to the row count; a size may be 0); rows of group g "
                    "are multiplied by weight[g]. Inputs x [tokens, k], weight [G, k, n], group_sizes [G] (int64); "
                    "output y [tokens, n].",
        reference=_grouped_matmul, inputs=_grouped_inputs,
        cases=[case("small", tokens=40, groups=4, k=32, n=24), case("many", tokens=67, groups=9, k=48, n=40),
               case("empty", tokens=23, groups=6, k=16, n=9, empty=(0, 2, 5))],
        perf=case("perf", tokens=2048, groups=8, k=256, n=256), tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_mlp", level=3, category="matmul",
        description="Two-layer MLP: y = gelu(x @ w1 + b1) @ w2 + b2 with exact (erf) GELU. Inputs x [m, d], "
                    "w1 [d, h], b1 [h], w2 [h, d], b2 [d]; output y [m, d].",
        reference=lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + b2, inputs=_mlp_inputs,
        cases=[case("small", m=8, d=32, h=64), case("odd", m=5, d=40, h=72), case("tail", m=1, d=7, h=5)],
        perf=case("perf", m=256, d=512, h=1024),
        tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_attention", level=3, category="attention",
        description="Scaled dot-product attention: o = softmax(q k^T / sqrt(d)) v for each batch and head. Inputs "
                    "q, k, v [b, h, s, d]; output o [b, h, s, d].",
        reference=lambda q, k, v: _attention(q, k, v, causal=False), inputs=_attention_inputs,
        cases=ATTENTION_CASES, perf=PERF_ATTENTION, tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_causal_attention", level=3, category="attention",
        description="Causal scaled dot-product attention: as attention, but query i attends only to keys j <= i. "
                    "Inputs q, k, v [b, h, s, d]; output o [b, h, s, d].",
        reference=lambda q, k, v: _attention(q, k, v, causal=True), inputs=_attention_inputs,
        cases=ATTENTION_CASES, perf=PERF_ATTENTION, tolerances=MATMUL_TOLERANCE,
    ),
    define_task(
        id="l3_topk", level=3, category="topk",
        description="Top-k along the last dimension, largest first: outputs[0] values [rows, k] (x's dtype), "
                    "outputs[1] indices [rows, k] (int64). Input x [rows, n]; attribute k (int). A row may hold equal "
                    "values: among them the lower index comes first (and is the one kept at the k-th place).",
        reference=_topk, inputs=_topk_inputs,
        attrs=lambda c: {"k": c["k"]}, cases=TOPK_CASES, perf=case("perf", rows=4096, n=1024, k=8),
    ),
    define_task(
        id="l3_moe_router", level=3, category="topk",
        description="Mixture-of-experts router: p = softmax(logits) over experts; keep the k largest p per row "
                    "(largest first) and renormalise them to sum to 1. Input logits [tokens, experts]; outputs[0] "
                    "weights [tokens, k], outputs[1] expert indices [tokens, k] (int64); attribute k (int). The logits of a "
                    "row are distinct; some rows hold logits in the hundreds.",
        reference=_router,
        inputs=lambda c, g: {"logits": distinct_rows(c["tokens"], c["experts"], c.dtype, g, c.get("spread", 4.0))},
        attrs=lambda c: {"k": c["k"]},
        cases=[case("small", tokens=64, experts=8, k=2), case("wide", tokens=13, experts=64, k=6),
               case("odd", tokens=5, experts=10, k=3), case("large", tokens=16, experts=8, k=2, spread=150.0)],
        perf=case("perf", tokens=8192, experts=64, k=8),
    ),
    define_task(
        id="l3_embedding_bag_sum", level=3, category="gather",
        description="Embedding lookup and sum per bag: y[b] = sum_j table[ids[b, j]]. Inputs table [vocab, d] and "
                    "ids [bags, per_bag] (int64 in [0, vocab)); output y [bags, d].",
        reference=lambda table, ids: table[ids].sum(1),
        inputs=_embedding_inputs,
        cases=[case("small", vocab=100, d=16, bags=8, per_bag=5), case("odd", vocab=37, d=33, bags=11, per_bag=3),
               case("one", vocab=5, d=7, bags=3, per_bag=1)],
        perf=case("perf", vocab=50000, d=128, bags=4096, per_bag=16),
    ),
]
