"""Level 1: single operators (elementwise maps, comparisons, reductions, simple norms).

The cases are chosen so that every attribute and every branch changes the answer beyond tolerance (issue 30,
point 5): sizes that are no multiple of a vector or a block and tails shorter than a vector, attributes that
differ from case to case (a kernel that hard-codes one fails another), values on both sides of every threshold,
rows of tiny mean square where eps decides the answer, all-negative rows for a maximum, exact ties where the
task says how they break, and +-inf / NaN only where the description says what they give.
"""

from __future__ import annotations

import torch

from kernelsage.tasks.generators import close_pairs, randn, spread_rows, sprinkle, tied, uniform
from kernelsage.tasks.model import case, define_task

INF, NAN = float("inf"), float("nan")
# Elementwise: a length under one 1024 block, odd 2-D and 3-D shapes, a tail shorter than any vector.
ROWS_2D = [case("vec", shape=(1000,)), case("odd2d", shape=(37, 129)), case("3d", shape=(4, 16, 65)),
           case("tail", shape=(7,))]
# Three float32 cases first, then float16 (a prompt showing three cases shows the first of each dtype).
ROWS_2D_FP16 = [*ROWS_2D[:3], case("half", dtype="float16", shape=(33, 70)), ROWS_2D[3],
                case("half_tail", dtype="float16", shape=(5,))]
PERF_ELEMENTWISE = case("perf", shape=(2048, 2048))
# Reductions over the last dimension: rows longer than a 4096 block, rows shorter than a vector, one element.
REDUCE_CASES = [case("rows", shape=(64, 300)), case("wide", shape=(3, 4099)), case("3d", shape=(5, 7, 129)),
                case("short", shape=(9, 7)), case("single", shape=(4, 1))]
PERF_REDUCE = case("perf", shape=(2048, 2048))


def _x(c, g):
    return {"x": randn(c["shape"], c.dtype, g)}


def _ab(c, g):
    return {"a": randn(c["shape"], c.dtype, g), "b": randn(c["shape"], c.dtype, g)}


def _close_ab(c, g):
    """Normal pairs, or (case `close`) pairs in the hundreds a relative 1e-4 apart: a kernel that rounds a or
    b to half loses their difference."""
    if not c.get("close"):
        return _ab(c, g)
    a, b = close_pairs(c["shape"], c.dtype, g, 1e2, 1e3, 1e-4)
    return {"a": a, "b": b}


def _extremes(c, g):
    """Inputs of the elementwise maps whose description admits +-inf: a few of them among large values."""
    x = randn(c["shape"], c.dtype, g, c.get("scale", 1.0))
    return {"x": sprinkle(x, g, 0.05, (INF, -INF)) if c.get("inf") else x}


def _greater_inputs(c, g):
    """a > b with equal pairs (equal is not greater), signed zeros and, where the case says, NaN and +-inf."""
    a, b = randn(c["shape"], c.dtype, g), randn(c["shape"], c.dtype, g)
    if c.get("ties"):
        b = torch.where(torch.rand(a.shape, generator=g) < 0.3, a, b)
        a, b = sprinkle(a, g, 0.05, (0.0, -0.0)), sprinkle(b, g, 0.05, (0.0, -0.0))
    if c.get("special"):
        a, b = sprinkle(a, g, 0.1, (NAN, INF, -INF)), sprinkle(b, g, 0.1, (NAN, INF, -INF))
    return {"a": a, "b": b}


def _reduce_inputs(c, g):
    """Normal rows (scaled by the case's `scale`: 1e5 is beyond half's range), or all-negative ones (a maximum
    started at 0 fails), or rows with tied maxima."""
    if c.get("ties"):
        return {"x": tied(c["shape"], c.dtype, g)}
    x = randn(c["shape"], c.dtype, g, c.get("scale", 1.0))
    return {"x": -x.abs() - 0.5 if c.get("negative") else x}


def _norm_rows(c, g):
    """Rows whose scales run from c['low'] to 1 (a tiny mean square decides eps's part), one all zeros."""
    if "low" not in c.params:
        return _x(c, g)
    *lead, n = c["shape"]
    rows = 1
    for size in lead:
        rows *= size
    return {"x": spread_rows(rows, n, c.dtype, g, c["low"], 1.0, zero_row=True).reshape(c["shape"])}


UNARY = "Input x (any shape, contiguous); output y with the same shape and dtype."
BINARY = "Inputs a and b (same shape); output y with that shape."
LASTDIM = "Input x of shape [..., N]; reduce over the last dimension; output shape [...]."
ATTRS_VARY = "The attributes differ from case to case."
NORM_CASES = [*REDUCE_CASES, case("tiny_rows", shape=(16, 300), low=1e-5), case("tiny_wide", shape=(12, 1031), low=1e-4)]


def _varying(name, default, by_case):
    """An attribute that takes another value in some cases (by case name), so that a kernel must read it."""
    return lambda c: {name: by_case.get(c.name, default)}


TASKS = [
    define_task(
        id="l1_relu", level=1, category="activation",
        description=f"ReLU: y = max(x, 0) elementwise. {UNARY} Cases include float16.",
        reference=torch.relu, inputs=_x, cases=ROWS_2D_FP16, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_leaky_relu", level=1, category="activation",
        description=f"Leaky ReLU: y = x if x > 0 else slope * x. {UNARY} Attribute slope (float). {ATTRS_VARY}",
        reference=lambda x, slope: torch.nn.functional.leaky_relu(x, slope),
        inputs=_x, attrs=_varying("slope", 0.1, {"odd2d": 0.2, "3d": -0.5, "tail": 0.01}),
        cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_sigmoid", level=1, category="activation",
        description=f"Sigmoid: y = 1 / (1 + exp(-x)). {UNARY} x may be large in magnitude (|x| > 100) or +-inf: "
                    "sigmoid(+inf) = 1, sigmoid(-inf) = 0.",
        reference=torch.sigmoid, inputs=_extremes,
        cases=[case(c.name, c.dtype, **c.params, scale=4.0) for c in ROWS_2D]
        + [case("saturate", shape=(17, 61), scale=60.0, inf=True)],
        perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_gelu", level=1, category="activation",
        description=f"GELU (exact, erf form): y = 0.5 x (1 + erf(x / sqrt(2))). {UNARY}",
        reference=torch.nn.functional.gelu, inputs=_x, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_add", level=1, category="elementwise",
        description=f"Addition: y = a + b. {BINARY} Cases include float16.",
        reference=torch.add, inputs=_ab, cases=ROWS_2D_FP16, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_scale_shift", level=1, category="elementwise",
        description=f"Affine map: y = x * alpha + beta. {UNARY} Attributes alpha and beta (floats). {ATTRS_VARY}",
        reference=lambda x, alpha, beta: x * alpha + beta,
        inputs=_x, attrs=lambda c: {"alpha": {"odd2d": -0.75, "tail": 3.0}.get(c.name, 1.5),
                                    "beta": {"3d": 0.6, "tail": -2.0}.get(c.name, -0.25)},
        cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_clamp", level=1, category="elementwise",
        description=f"Clamp: y = min(max(x, low), high). {UNARY} Attributes low and high (floats, low < high). "
                    f"{ATTRS_VARY} x may hold +-inf (clamped like any value).",
        reference=lambda x, low, high: torch.clamp(x, low, high), inputs=_extremes,
        attrs=lambda c: {"low": {"odd2d": -1.25, "3d": 0.1, "inf": -0.3}.get(c.name, -0.5),
                         "high": {"odd2d": 0.3, "3d": 1.2, "inf": 0.4}.get(c.name, 0.75)},
        cases=[*ROWS_2D, case("inf", shape=(9, 57), scale=2.0, inf=True)], perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_abs_diff", level=1, category="elementwise",
        description=f"Absolute difference: y = |a - b|. {BINARY} Some pairs are close values in the hundreds, "
                    "whose difference is small next to either.",
        reference=lambda a, b: (a - b).abs(), inputs=_close_ab,
        cases=[*ROWS_2D, case("close", shape=(29, 67), close=True)], perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_maximum", level=1, category="comparison",
        description=f"Elementwise maximum: y = max(a, b). {BINARY}",
        reference=torch.maximum, inputs=_ab, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_greater", level=1, category="comparison",
        description=f"Comparison: y = a > b as bool (one byte per element, 0 or 1). {BINARY} Output dtype bool. "
                    "Equal values (0.0 and -0.0 are equal) are not greater; any comparison with NaN is false and "
                    "+-inf compare as the IEEE 754 infinities (inputs may hold them).",
        reference=torch.gt, inputs=_greater_inputs,
        cases=[*ROWS_2D, case("ties", shape=(23, 51), ties=True), case("special", shape=(19, 43), special=True)],
        perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_sum_lastdim", level=1, category="reduction",
        description=f"Sum: y[...] = sum_j x[..., j]. {LASTDIM}",
        reference=lambda x: x.sum(-1), inputs=_x, cases=REDUCE_CASES, perf=PERF_REDUCE,
    ),
    define_task(
        id="l1_mean_dim", level=1, category="reduction",
        description="Mean over one dimension: y = x.mean(dim). Input x of rank 3; attribute dim (int, 0..2); "
                    "output has x's shape without that dimension.",
        reference=lambda x, dim: x.mean(dim),
        inputs=_x, attrs=lambda c: {"dim": c["dim"]},
        cases=[case("d0", shape=(33, 8, 17), dim=0), case("d1", shape=(6, 40, 9), dim=1),
               case("d2", shape=(5, 7, 130), dim=2), case("d1_one", shape=(3, 1, 7), dim=1),
               case("d0_long", shape=(1029, 3, 2), dim=0)],
        perf=case("perf", shape=(64, 256, 256), dim=1),
    ),
    define_task(
        id="l1_max_lastdim", level=1, category="reduction",
        description=f"Maximum: y[...] = max_j x[..., j]. {LASTDIM} Some rows hold values beyond float16's range "
                    "(|x| near 1e5).",
        reference=lambda x: x.amax(-1), inputs=_reduce_inputs,
        cases=[*REDUCE_CASES, case("negative", shape=(6, 37), negative=True),
               case("huge", shape=(7, 45), scale=1e5)], perf=PERF_REDUCE,
    ),
    define_task(
        id="l1_argmax_lastdim", level=1, category="reduction",
        description=f"Argmax: y[...] = index of the largest x[..., j] (int64; the first one on ties: rows may hold "
                    f"equal values). {LASTDIM}",
        reference=lambda x: x.argmax(-1), inputs=_reduce_inputs,
        cases=[*REDUCE_CASES, case("negative", shape=(6, 37), negative=True),
               case("ties", shape=(24, 53), ties=True), case("ties_wide", shape=(2, 4099), ties=True)],
        perf=PERF_REDUCE,
    ),
    define_task(
        id="l1_cumsum_lastdim", level=1, category="reduction",
        description="Inclusive prefix sum along the last dimension: y[..., j] = sum_{i<=j} x[..., i]. "
                    "Input x [..., N]; output has x's shape.",
        reference=lambda x: x.cumsum(-1),
        inputs=lambda c, g: {"x": uniform(c["shape"], c.dtype, g, -1.0, 1.0)},
        cases=[case("rows", shape=(16, 200)), case("3d", shape=(3, 5, 77)), case("short", shape=(6, 7)),
               case("single", shape=(3, 1)), case("long", shape=(2, 2600))],
        perf=case("perf", shape=(1024, 1024)),
    ),
    define_task(
        id="l1_l2_normalize", level=1, category="norm",
        description="L2 normalisation of each row: y = x / max(||x||_2, eps) over the last dimension. "
                    f"Input x [..., N]; output has x's shape. Attribute eps (float). {ATTRS_VARY} Some rows have "
                    "a norm near or below eps (one is all zeros).",
        reference=lambda x, eps: torch.nn.functional.normalize(x, p=2.0, dim=-1, eps=eps),
        inputs=_norm_rows, attrs=_varying("eps", 1e-12, {"tiny_wide": 1e-6, "short": 1e-3}),
        cases=[*REDUCE_CASES, case("tiny_rows", shape=(24, 300), low=1e-16), case("tiny_wide", shape=(12, 1031), low=1e-9)],
        perf=PERF_REDUCE,
    ),
    define_task(
        id="l1_rms_norm_plain", level=1, category="norm",
        description="RMS normalisation without weight: y = x / sqrt(mean_j x[..., j]^2 + eps) over the last "
                    f"dimension. Input x [..., N]; output has x's shape. Attribute eps (float). {ATTRS_VARY} Some "
                    "rows have a mean square near or below eps (one is all zeros).",
        reference=lambda x, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps),
        inputs=_norm_rows, attrs=_varying("eps", 1e-6, {"tiny_wide": 1e-4, "short": 1e-3}),
        cases=NORM_CASES, perf=PERF_REDUCE,
    ),
]
