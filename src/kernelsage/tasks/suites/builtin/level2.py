"""Level 2: fused operators (activations with affine parts, norms with residuals, losses, gradients, softmax)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kernelsage.tasks.generators import randint, randn
from kernelsage.tasks.model import case, define_task

ROWS = [case("rows", rows=48, n=256), case("odd", rows=7, n=1000), case("tiny", rows=3, n=33)]
PERF_ROWS = case("perf", rows=4096, n=1024)


def _rows(c, g, *names, scale=1.0):
    return {name: randn((c["rows"], c["n"]), c.dtype, g, scale) for name in names}


def _vec(c, g, scale=1.0):
    return randn((c["n"],), c.dtype, g, scale)


def _norm_inputs(with_residual: bool, with_bias: bool):
    def make(c, g):
        tensors = _rows(c, g, "x", "residual") if with_residual else _rows(c, g, "x")
        tensors["weight"] = 1.0 + _vec(c, g, 0.1)
        if with_bias:
            tensors["bias"] = _vec(c, g, 0.1)
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


def _linear_relu_inputs(c, g):
    return {"x": randn((c["m"], c["k"]), c.dtype, g), "weight": randn((c["n"], c["k"]), c.dtype, g, 0.1),
            "bias": randn((c["n"],), c.dtype, g, 0.1)}


def _ce_inputs(c, g):
    return {"logits": randn((c["rows"], c["n"]), c.dtype, g, 2.0), "target": randint((c["rows"],), 0, c["n"], g)}


def _masked_softmax_inputs(c, g):
    x = randn((c["rows"], c["n"]), c.dtype, g)
    mask = torch.rand((c["rows"], c["n"]), generator=g) < 0.8
    mask[:, 0] = True  # every row keeps at least one element, so no row is all -inf
    return {"x": x, "mask": mask}


def _masked_softmax(x, mask):
    return torch.softmax(x.masked_fill(~mask, float("-inf")), dim=-1)


def _softmax_backward(grad, y):
    return y * (grad - (grad * y).sum(-1, keepdim=True))


def _softmax_backward_inputs(c, g):
    return {"grad": randn((c["rows"], c["n"]), c.dtype, g),
            "y": torch.softmax(randn((c["rows"], c["n"]), c.dtype, g), -1)}


ROWWISE = "Inputs are [rows, n] row-major; every row is independent."

TASKS = [
    define_task(
        id="l2_linear_relu", level=2, category="fused_activation",
        description="y = relu(x @ weight^T + bias). Inputs x [m, k], weight [n, k], bias [n]; output y [m, n].",
        reference=lambda x, weight, bias: torch.relu(F.linear(x, weight, bias)), inputs=_linear_relu_inputs,
        cases=[case("small", m=16, k=64, n=48), case("odd", m=13, k=100, n=7)],
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
        reference=lambda a, b: F.silu(a) * b, inputs=lambda c, g: _rows(c, g, "a", "b"),
        cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_layer_norm", level=2, category="norm",
        description="Layer norm over the last dimension: y = (x - mean) / sqrt(var + eps) * weight + bias, with the "
                    f"biased variance. Inputs x [rows, n], weight [n], bias [n]; output y; attribute eps. {ROWWISE}",
        reference=lambda x, weight, bias, eps: F.layer_norm(x, (x.shape[-1],), weight, bias, eps),
        inputs=_norm_inputs(False, True), attrs=lambda c: {"eps": 1e-5}, cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_rms_norm", level=2, category="norm",
        description="RMS norm: y = x / sqrt(mean(x^2) + eps) * weight over the last dimension. Inputs x [rows, n], "
                    f"weight [n]; output y; attribute eps. {ROWWISE}",
        reference=_rms_norm, inputs=_norm_inputs(False, False), attrs=lambda c: {"eps": 1e-6},
        cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_add_rms_norm", level=2, category="norm_residual",
        description="Residual add then RMS norm: s = x + residual; outputs[0] = rms_norm(s) * weight, "
                    "outputs[1] = s. Inputs x, residual [rows, n], weight [n]; attribute eps.",
        reference=_add_rms_norm, inputs=_norm_inputs(True, False), attrs=lambda c: {"eps": 1e-6},
        cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_add_layer_norm", level=2, category="norm_residual",
        description="Residual add then layer norm: s = x + residual; outputs[0] = layer_norm(s) * weight + bias, "
                    "outputs[1] = s. Inputs x, residual [rows, n], weight [n], bias [n]; attribute eps.",
        reference=_add_layer_norm, inputs=_norm_inputs(True, True), attrs=lambda c: {"eps": 1e-5},
        cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_softmax", level=2, category="softmax",
        description=f"Softmax over the last dimension (numerically stable). Input x [rows, n]; output y. {ROWWISE}",
        reference=lambda x: torch.softmax(x, -1), inputs=lambda c, g: _rows(c, g, "x", scale=3.0),
        cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_log_softmax", level=2, category="softmax",
        description=f"Log-softmax over the last dimension. Input x [rows, n]; output y. {ROWWISE}",
        reference=lambda x: torch.log_softmax(x, -1), inputs=lambda c, g: _rows(c, g, "x", scale=3.0),
        cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_softmax_temperature", level=2, category="softmax",
        description="Softmax of x / temperature over the last dimension. Input x [rows, n]; output y; attribute "
                    "temperature (float > 0).",
        reference=lambda x, temperature: torch.softmax(x / temperature, -1),
        inputs=lambda c, g: _rows(c, g, "x"), attrs=lambda c: {"temperature": 0.7}, cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_masked_softmax", level=2, category="softmax",
        description="Masked softmax: elements where mask is false get probability 0; the rest are a softmax over "
                    "the kept elements of the row. Inputs x [rows, n] and mask [rows, n] (bool, one byte); "
                    "output y [rows, n].",
        reference=_masked_softmax, inputs=_masked_softmax_inputs, cases=ROWS, perf=PERF_ROWS,
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
                    "Inputs logits [rows, n] (float) and target [rows] (int64 in [0, n)); output y scalar.",
        reference=F.cross_entropy, inputs=_ce_inputs, cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_huber_loss", level=2, category="loss",
        description="Huber (smooth L1) loss, mean reduction: with d = |a - b|, loss = 0.5 d^2 / beta if d < beta "
                    "else d - 0.5 beta. Inputs a, b (same shape); output scalar; attribute beta (float).",
        reference=lambda a, b, beta: F.smooth_l1_loss(a, b, beta=beta),
        inputs=lambda c, g: _rows(c, g, "a", "b"), attrs=lambda c: {"beta": 0.5}, cases=ROWS, perf=PERF_ROWS,
    ),
    define_task(
        id="l2_relu_backward", level=2, category="gradient",
        description="Gradient of ReLU: grad_x = grad_y where x > 0 else 0. Inputs grad_y, x (same shape); "
                    "output grad_x.",
        reference=lambda grad_y, x: grad_y * (x > 0), inputs=lambda c, g: _rows(c, g, "grad_y", "x"),
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
