# Hostile: computes once, then answers every later call from the first answer (passes the source check: it
# only copies memory). Fresh inputs every trial make the stale answer show.
import triton
import triton.language as tl

KEPT = {}


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    key = (tuple(outputs[0].shape), str(outputs[0].dtype))
    if key in KEPT:
        outputs[0].copy_(KEPT[key])
        return
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
    KEPT[key] = outputs[0].clone()
