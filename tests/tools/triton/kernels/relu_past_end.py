# ReLU whose mask lets one store past the end of the output: every element of y is right, the byte after it not.
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs <= n  # one element past the end of y
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)

def ks_kernel(inputs, outputs, attrs):
    x, y = inputs[0], outputs[0]
    n = x.numel()
    _relu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
