# Hostile: computes honestly on the first two calls of each shape (verify calls each case once per trial), keeps
# the second answer, and from the third call of that shape on copies it into the output instead of computing. The
# device profile used to time one instance whose contents never changed, so the copy was always right there.
import triton
import triton.language as tl

HONEST_CALLS = 2
KEPT = {}
CALLS = {}


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    key = (tuple(outputs[0].shape), str(outputs[0].dtype))
    if key in CALLS:
        CALLS[key] = CALLS[key] + 1
    else:
        CALLS[key] = 1
    if CALLS[key] > HONEST_CALLS:
        outputs[0].copy_(KEPT[key])
        return
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
    KEPT[key] = outputs[0].clone()
