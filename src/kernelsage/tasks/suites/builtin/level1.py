"""Level 1: single operators (elementwise maps, comparisons, reductions, simple norms)."""

from __future__ import annotations

import torch

from kernelsage.tasks.generators import randn, uniform
from kernelsage.tasks.model import case, define_task

ROWS_2D = [case("vec", shape=(1000,)), case("odd2d", shape=(37, 129)), case("3d", shape=(4, 16, 65))]
ROWS_2D_FP16 = [*ROWS_2D, case("half", dtype="float16", shape=(33, 70))]
PERF_ELEMENTWISE = case("perf", shape=(2048, 2048))
REDUCE_CASES = [case("rows", shape=(64, 300)), case("wide", shape=(3, 4099)), case("3d", shape=(5, 7, 129))]
PERF_REDUCE = case("perf", shape=(2048, 2048))


def _x(c, g):
    return {"x": randn(c["shape"], c.dtype, g)}


def _ab(c, g):
    return {"a": randn(c["shape"], c.dtype, g), "b": randn(c["shape"], c.dtype, g)}


UNARY = "Input x (any shape, contiguous); output y with the same shape and dtype."
BINARY = "Inputs a and b (same shape); output y with that shape."
LASTDIM = "Input x of shape [..., N]; reduce over the last dimension; output shape [...]."

TASKS = [
    define_task(
        id="l1_relu", level=1, category="activation",
        description=f"ReLU: y = max(x, 0) elementwise. {UNARY} Cases include float16.",
        reference=torch.relu, inputs=_x, cases=ROWS_2D_FP16, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_leaky_relu", level=1, category="activation",
        description=f"Leaky ReLU: y = x if x > 0 else slope * x. {UNARY} Attribute slope (float).",
        reference=lambda x, slope: torch.nn.functional.leaky_relu(x, slope),
        inputs=_x, attrs=lambda c: {"slope": 0.1}, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_sigmoid", level=1, category="activation",
        description=f"Sigmoid: y = 1 / (1 + exp(-x)). {UNARY}",
        reference=torch.sigmoid, inputs=lambda c, g: {"x": randn(c["shape"], c.dtype, g, 4.0)},
        cases=ROWS_2D, perf=PERF_ELEMENTWISE,
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
        description=f"Affine map: y = x * alpha + beta. {UNARY} Attributes alpha and beta (floats).",
        reference=lambda x, alpha, beta: x * alpha + beta,
        inputs=_x, attrs=lambda c: {"alpha": 1.5, "beta": -0.25}, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_clamp", level=1, category="elementwise",
        description=f"Clamp: y = min(max(x, low), high). {UNARY} Attributes low and high (floats).",
        reference=lambda x, low, high: torch.clamp(x, low, high),
        inputs=_x, attrs=lambda c: {"low": -0.5, "high": 0.75}, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_abs_diff", level=1, category="elementwise",
        description=f"Absolute difference: y = |a - b|. {BINARY}",
        reference=lambda a, b: (a - b).abs(), inputs=_ab, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_maximum", level=1, category="comparison",
        description=f"Elementwise maximum: y = max(a, b). {BINARY}",
        reference=torch.maximum, inputs=_ab, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
    ),
    define_task(
        id="l1_greater", level=1, category="comparison",
        description=f"Comparison: y = a > b as bool (one byte per element, 0 or 1). {BINARY} Output dtype bool.",
        reference=torch.gt, inputs=_ab, cases=ROWS_2D, perf=PERF_ELEMENTWISE,
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
               case("d2", shape=(5, 7, 130), dim=2)],
        perf=case("perf", shape=(64, 256, 256), dim=1),
    ),
    define_task(
        id="l1_max_lastdim", level=1, category="reduction",
        description=f"Maximum: y[...] = max_j x[..., j]. {LASTDIM}",
        reference=lambda x: x.amax(-1), inputs=_x, cases=REDUCE_CASES, perf=PERF_REDUCE,
    ),
    define_task(
        id="l1_argmax_lastdim", level=1, category="reduction",
        description=f"Argmax: y[...] = index of the largest x[..., j] (int64; the first one on ties). {LASTDIM}",
        reference=lambda x: x.argmax(-1), inputs=_x, cases=REDUCE_CASES, perf=PERF_REDUCE,
    ),
    define_task(
        id="l1_cumsum_lastdim", level=1, category="reduction",
        description="Inclusive prefix sum along the last dimension: y[..., j] = sum_{i<=j} x[..., i]. "
                    "Input x [..., N]; output has x's shape.",
        reference=lambda x: x.cumsum(-1),
        inputs=lambda c, g: {"x": uniform(c["shape"], c.dtype, g, -1.0, 1.0)},
        cases=[case("rows", shape=(16, 200)), case("3d", shape=(3, 5, 77))], perf=case("perf", shape=(1024, 1024)),
    ),
    define_task(
        id="l1_l2_normalize", level=1, category="norm",
        description="L2 normalisation of each row: y = x / max(||x||_2, eps) over the last dimension. "
                    "Input x [..., N]; output has x's shape. Attribute eps (float).",
        reference=lambda x, eps: torch.nn.functional.normalize(x, p=2.0, dim=-1, eps=eps),
        inputs=_x, attrs=lambda c: {"eps": 1e-12}, cases=REDUCE_CASES, perf=PERF_REDUCE,
    ),
    define_task(
        id="l1_rms_norm_plain", level=1, category="norm",
        description="RMS normalisation without weight: y = x / sqrt(mean_j x[..., j]^2 + eps) over the last "
                    "dimension. Input x [..., N]; output has x's shape. Attribute eps (float).",
        reference=lambda x, eps: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps),
        inputs=_x, attrs=lambda c: {"eps": 1e-6}, cases=REDUCE_CASES, perf=PERF_REDUCE,
    ),
]
