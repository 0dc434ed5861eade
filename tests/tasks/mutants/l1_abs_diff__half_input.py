"""Mutant of the l1_abs_diff Triton example: a is rounded to float16 before the difference."""

import triton
import triton.language as tl


@triton.jit
def _kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float16)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    y = tl.abs(a - b)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[(triton.cdiv(n, 1024),)](*inputs, outputs[0], n, BLOCK=1024)
