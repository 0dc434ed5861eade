"""Mutant of the l2_rms_norm Triton example: x is rounded to float16 (inf beyond 65504), then computed in float32
(so rows of tiny mean square, whose squares would underflow in half, do not expose it)."""

import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float16).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    tl.store(y_ptr + row * n + cols, (x * scale * w).to(y_ptr.dtype.element_ty), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    x = inputs[0]
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    _kernel[(rows,)](*inputs, outputs[0], n, attrs["eps"], BLOCK=triton.next_power_of_2(n))
