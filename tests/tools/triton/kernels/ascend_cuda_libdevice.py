# Fine on cuda, not on Ascend: triton-ascend's triton.language.extra has no `cuda` (its libdevice is its own).
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.extra.cuda.libdevice.fmax(x, 0.0)  # ERROR
    tl.store(y_ptr + offs, y, mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
