"""Level 2: fused operators (activations with affine parts, norms with residuals, losses, gradients, softmax).

As in level 1, the cases make every attribute and branch change the answer beyond tolerance (issue 30, point
5): a single row, rows shorter than a vector and longer than a 1024 block; near-constant rows of tiny variance
where eps decides a norm; weights far from 1; logits large enough that exp overflows without subtracting the
row's maximum; attributes that differ between cases; exact zeros at a gradient's threshold; -inf only where
the description says what it gives.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernelsage.tasks.generators import randint, randn, spread_rows, sprinkle, torch_dtype
from kernelsage.tasks.model import case, define_task

ROWS = [case("rows", rows=48, n=256), case("odd", rows=7, n=1000), case("tiny", rows=3, n=33),
        case("one", rows=1, n=1029), case("short", rows=5, n=7)]
PERF_ROWS = case("perf", rows=4096, n=1024)
# Norms: rows whose scale runs from `low` to 1 (mean square or variance near, below and above any eps).
NORM_CASES = [*ROWS, case("flat", rows=16, n=300, low=1e-5), case("flat_wide", rows=12, n=1031, low=1e-4)]
NORM_EPS = {"flat_wide": 1e-4, "short": 1e-3}  # eps differs from the task's default in these cases
# Softmaxes and losses: rows shifted by up to +-200, where exp overflows (or underflows to 0 / 0) unless the
# row's maximum is subtracted first.
LARGE = case("large", rows=8, n=300, shift=200.0)
SOFTMAX_CASES = [*ROWS, LARGE]


def _rows(c, g, *names, scale=1.0):
    shift = c.get("shift", 0.0)
    if not shift:
        return {name: randn((c["rows"], c["n"]), c.dtype, g, scale) for name in names}
    offsets = (torch.rand((c["rows"], 1), generator=g) * 2 - 1) * shift
    return {name: (randn((c["rows"], c["n"]), "float32", g, scale) + offsets).to(torch_dtype(c.dtype)) for name in names}


def _vec(c, g, scale=1.0):
    return randn((c["n"],), c.dtype, g, scale)


def _norm_inputs(with_residual: bool, with_bias: bool, offset: float = 0.0):
    """x (and the residual) [rows, n], a weight far from 1 (some entries negative), a bias. In the cases with
    `low`, x and the residual share a scale per row, so their sum has a tiny mean square (RMS norm) or, around
    an `offset` per row, a tiny variance (layer norm); one row is all zeros. A case's `scale` and
    `weight_scale` multiply x and the weight (1e5: beyond half's range, where a kernel that rounds to half
    gets inf)."""
    def make(c, g):
        rows, n = c["rows"], c["n"]
        if "low" in c.params:
            width = 2 * n if with_residual else n
            both = spread_rows(rows, width, c.dtype, g, c["low"], 1.0, offset=offset, zero_row=True)
            tensors = {"x": both[:, :n].contiguous()}
            if with_residual:
                tensors["residual"] = both[:, n:].contiguous()
        else:
            names = ("x", "residual") if with_residual else ("x",)
            tensors = _rows(c, g, *names, scale=c.get("scale", 1.0))
        tensors["weight"] = (1.0 + _vec(c, g, 0.6)) * c.get("weight_scale", 1.0)
        if with_bias:
            tensors["bias"] = _vec(c, g, 0.5)
        return tensors
    return make


def _rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _add_rms_norm(x, residual, weight, eps):
    total = x + residual
    return _rms_norm(total, weight, eps), total


def _add_layer_norm(x, residual, weight, bias, eps):
    total = x + residual
    return F.layer_norm(total, (total.shape[-1],), weight, bias, eps), total


def _eps(default):
    return lambda c: {"eps": NORM_EPS.get(c.name, default)}


def _linear_relu_inputs(c, g):
    return {"x": randn((c["m"], c["k"]), c.dtype, g), "weight": randn((c["n"], c["k"]), c.dtype, g, 0.1),
            "bias": randn((c["n"],), c.dtype, g, 0.1)}


def _ce_inputs(c, g):
    return {"logits": _rows(c, g, "logits", scale=2.0)["logits"], "target": randint((c["rows"],), 0, c["n"], g)}


def _keep_one(c, g):
    """A [rows, n] bool mask with one random place per row set (no row is left with nothing to normalise)."""
    keep = torch.zeros((c["rows"], c["n"]), dtype=torch.bool)
    keep[torch.arange(c["rows"]), torch.randint(0, c["n"], (c["rows"],), generator=g)] = True
    return keep


def _masked_softmax_inputs(c, g):
    x = _rows(c, g, "x")["x"]
    mask = (torch.rand((c["rows"], c["n"]), generator=g) < c.get("keep", 0.8)) | _keep_one(c, g)
    return {"x": x, "mask": mask}


def _softmax_inputs(c, g):
    """Rows (scale 3), in the case `masked` with a fifth of them -inf, one finite place per row kept."""
    x = _rows(c, g, "x", scale=3.0)["x"]
    if c.get("masked"):
        x = torch.where(_keep_one(c, g), x, sprinkle(x, g, 0.2, (float("-inf"),)))
    return {"x": x}


def _masked_softmax(x, mask):
    return torch.softmax(x.masked_fill(~mask, float("-inf")), dim=-1)


def _softmax_backward(grad, y):
    return y * (grad - (grad * y).sum(-1, keepdim=True))


def _softmax_backward_inputs(c, g):
    return {"grad": randn((c["rows"], c["n"]), c.dtype, g),
            "y": torch.softmax(randn((c["rows"], c["n"]), c.dtype, g), -1)}


def _relu_backward_inputs(c, g):
    """grad_y and x, a tenth of x exactly 0 or -0 (the gradient there is 0: x > 0 is false)."""
    tensors = _rows(c, g, "grad_y", "x")
    tensors["x"] = sprinkle(tensors["x"], g, 0.1, (0.0, -0.0))
    return tensors


ROWWISE = "Inputs are [rows, n] row-major; every row is independent."
ATTRS_VARY = "The attribute differs from case to case."
NORM_NOTE = "eps differs from case to case; some rows are near-constant, with a variance (and for RMS norm a mean " \
            "square) near or below eps, one is all zeros; weight is far from 1."
LARGE_NOTE = "Some rows hold values in the hundreds (exp overflows unless the row's maximum is subtracted first)."

TASKS = [
    define_task(
        id="l2_linear_relu", level=2, category="fused_activation",
        description="y = relu(x @ weight^T + bias). Inputs x [m, k], weight [n, k], bias [n]; output y [m, n].",
        reference=lambda x, weight, bias: torch.relu(F.linear(x, weight, bias)), inputs=_linear_relu_inputs,
        cases=[case("small", m=16, k=64, n=48), case("odd", m=13, k=100, n=7), case("tail", m=1, k=7, n=5)],
        perf=case("perf", m=512, k=512, n=512),
    ),
    define_task(
        id="l2_bias_gelu_tanh", level=2, category="fused_activation",
        description="y = gelu_tanh(x + bias) with gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))). "
                    f"Inputs x [rows, n], bias [n]; output y [rows, n]. {ROWWISE}",
        reference=lambda x, bias: F.gelu(x + bias, approximate="tanh"),
        inputs=lambda c, g: {**_rows(c, g, "x"), "bias": _vec(c, g)}, cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_swiglu", level=2, category="fused_activation",
        description="SwiGLU gate: y = silu(a) * b with silu(v) = v / (1 + exp(-v)). Inputs a, b [rows, n]; "
                    "output y [rows, n].",
        reference=lambda a, b: F.silu(a) * b,
        inputs=lambda c, g: {**_rows(c, g, "a", scale=c.get("scale", 1.0)), **_rows(c, g, "b")},
        cases=[*ROWS, case("large", rows=6, n=301, scale=50.0)], perf=PERF_ROWS,
    ),
    define_task(
        id="l2_layer_norm", level=2, category="norm",
        description="Layer norm over the last dimension: y = (x - mean) / sqrt(var + eps) * weight + bias, with the "
                    f"biased variance. Inputs x [rows, n], weight [n], bias [n]; output y; attribute eps. {ROWWISE} {NORM_NOTE}",
        reference=lambda x, weight, bias, eps: F.layer_norm(x, (x.shape[-1],), weight, bias, eps),
        inputs=_norm_inputs(False, True, offset=1.0), attrs=_eps(1e-5), cases=NORM_CASES, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_rms_norm", level=2, category="norm",
        description="RMS norm: y = x / sqrt(mean(x^2) + eps) * weight over the last dimension. Inputs x [rows, n], "
                    f"weight [n]; output y; attribute eps. {ROWWISE} {NORM_NOTE} Cases include float16 (x, "
                    "weight and y), with rows of thousands of elements, and float32 rows and weights of magnitude "
                    "near 1e5 (beyond float16's range).",
        reference=_rms_norm, inputs=_norm_inputs(False, False), attrs=_eps(1e-6),
        cases=[*NORM_CASES, case("half", dtype="float16", rows=6, n=4099),
               case("huge", rows=5, n=300, scale=1e5, weight_scale=1e5)], perf=PERF_ROWS,
    ),
    define_task(
        id="l2_add_rms_norm", level=2, category="norm_residual",
        description="Residual add then RMS norm: s = x + residual; outputs[0] = rms_norm(s) * weight, "
                    f"outputs[1] = s. Inputs x, residual [rows, n], weight [n]; attribute eps. {NORM_NOTE}",
        reference=_add_rms_norm, inputs=_norm_inputs(True, False), attrs=_eps(1e-6),
        cases=NORM_CASES, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_add_layer_norm", level=2, category="norm_residual",
        description="Residual add then layer norm: s = x + residual; outputs[0] = layer_norm(s) * weight + bias, "
                    f"outputs[1] = s. Inputs x, residual [rows, n], weight [n], bias [n]; attribute eps. {NORM_NOTE}",
        reference=_add_layer_norm, inputs=_norm_inputs(True, True, offset=1.0), attrs=_eps(1e-5),
        cases=NORM_CASES, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_softmax", level=2, category="softmax",
        description="Softmax over the last dimension (numerically stable: rows may hold values in the hundreds). "
                    f"Input x [rows, n]; output y. {ROWWISE} x may hold -inf (a masked place: probability 0); every "
                    "row has a finite value.",
        reference=lambda x: torch.softmax(x, -1), inputs=_softmax_inputs,
        cases=[*SOFTMAX_CASES, case("masked", rows=9, n=130, masked=True)], perf=PERF_ROWS,
    ),
    define_task(
        id="l2_log_softmax", level=2, category="softmax",
        description=f"Log-softmax over the last dimension. Input x [rows, n]; output y. {ROWWISE} {LARGE_NOTE}",
        reference=lambda x: torch.log_softmax(x, -1), inputs=lambda c, g: _rows(c, g, "x", scale=3.0),
        cases=SOFTMAX_CASES, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_softmax_temperature", level=2, category="softmax",
        description="Softmax of x / temperature over the last dimension. Input x [rows, n]; output y; attribute "
                    f"temperature (float > 0). {ATTRS_VARY} {LARGE_NOTE}",
        reference=lambda x, temperature: torch.softmax(x / temperature, -1), inputs=lambda c, g: _rows(c, g, "x"),
        attrs=lambda c: {"temperature": {"odd": 2.5, "tiny": 0.05, "large": 1.3}.get(c.name, 0.7)},
        cases=SOFTMAX_CASES, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_masked_softmax", level=2, category="softmax",
        description="Masked softmax: elements where mask is false get probability 0; the rest are a softmax over "
                    "the kept elements of the row. Inputs x [rows, n] and mask [rows, n] (bool, one byte); "
                    "output y [rows, n]. Every row keeps at least one element (some keep only one).",
        reference=_masked_softmax, inputs=_masked_softmax_inputs,
        cases=[*SOFTMAX_CASES, case("sparse", rows=16, n=200, keep=0.01)], perf=PERF_ROWS,
    ),
    define_task(
        id="l2_mse_loss", level=2, category="loss",
        description="Mean squared error: y = mean((a - b)^2) over all elements. Inputs a, b (same shape); "
                    "output y is a scalar (0-dimensional, one element).",
        reference=F.mse_loss, inputs=lambda c, g: _rows(c, g, "a", "b"), cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_cross_entropy", level=2, category="loss",
        description="Cross entropy with mean reduction: y = mean_r (logsumexp(logits[r]) - logits[r, target[r]]). "
                    f"Inputs logits [rows, n] (float) and target [rows] (int64 in [0, n)); output y scalar. {LARGE_NOTE}",
        reference=F.cross_entropy, inputs=_ce_inputs, cases=SOFTMAX_CASES, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_huber_loss", level=2, category="loss",
        description="Huber (smooth L1) loss, mean reduction: with d = |a - b|, loss = 0.5 d^2 / beta if d < beta "
                    f"else d - 0.5 beta. Inputs a, b (same shape); output scalar; attribute beta (float). {ATTRS_VARY}",
        reference=lambda a, b, beta: F.smooth_l1_loss(a, b, beta=beta), inputs=lambda c, g: _rows(c, g, "a", "b"),
        attrs=lambda c: {"beta": {"odd": 2.0, "tiny": 0.1, "one": 1.5}.get(c.name, 0.5)}, cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_relu_backward", level=2, category="gradient",
        description="Gradient of ReLU: grad_x = grad_y where x > 0 else 0. Inputs grad_y, x (same shape); "
                    "output grad_x. x holds exact zeros (0 and -0), where grad_x is 0.",
        reference=lambda grad_y, x: grad_y * (x > 0), inputs=_relu_backward_inputs,
        cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_softmax_backward", level=2, category="gradient",
        description="Gradient of softmax over the last dimension: grad_x = y * (grad - sum_j(grad * y)). Inputs "
                    "grad [rows, n] and y [rows, n] (softmax outputs); output grad_x [rows, n].",
        reference=_softmax_backward, inputs=_softmax_backward_inputs, cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_sigmoid_backward", level=2, category="gradient",
        description="Gradient of sigmoid given its output: grad_x = grad_y * y * (1 - y). Inputs grad_y, y (same "
                    "shape, y in (0, 1)); output grad_x.",
        reference=lambda grad_y, y: grad_y * y * (1 - y),
        inputs=lambda c, g: {"grad_y": randn((c["rows"], c["n"]), c.dtype, g),
                             "y": torch.sigmoid(randn((c["rows"], c["n"]), c.dtype, g))},
        cases=ROWS, perf=PERF_ROWS,
    ),
]
