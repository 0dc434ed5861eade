"""Reference Triton kernel for l1_relu (builtin suite), checked by the interpreter in tests/tools/triton."""

import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.maximum(x, 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[(triton.cdiv(n, 1024),)](*inputs, outputs[0], n, BLOCK=1024)
