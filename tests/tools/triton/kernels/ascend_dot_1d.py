# Front-end error: tl.dot of two 1-D blocks (it needs 2-D or 3-D), inside a @triton.jit helper.
import triton
import triton.language as tl


@triton.jit
def _square(x):
    return tl.dot(x, x)  # ERROR


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, _square(x), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
