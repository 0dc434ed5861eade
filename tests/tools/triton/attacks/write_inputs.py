# Hostile: writes its answer into its input and copies it out (to ease its work, or to slow the reference down).
# The inputs are mapped read-only in the runner: the store faults.
import triton
import triton.language as tl


@triton.jit
def _relu_in_place(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = inputs[0].numel()
    _relu_in_place[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
