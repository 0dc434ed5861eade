# An error in ks_kernel's own (host) code: the kernel is launched with an argument it does not take.
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024, SCALE=2)  # ERROR
