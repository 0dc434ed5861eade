"""Mutant of the l1_max_lastdim Triton example: x is rounded to float16 (inf beyond 65504)."""

import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf")).to(tl.float16)
    tl.store(y_ptr + row, tl.max(x, axis=0).to(y_ptr.dtype.element_ty))


def ks_kernel(inputs, outputs, attrs):
    x = inputs[0]
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    _kernel[(rows,)](*inputs, outputs[0], n, BLOCK=triton.next_power_of_2(n))
