# Front-end error: a name that is defined nowhere, used inside the @triton.jit kernel.
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.maximum(x, threshold)  # noqa: F821  # ERROR
    tl.store(y_ptr + offs, y, mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
