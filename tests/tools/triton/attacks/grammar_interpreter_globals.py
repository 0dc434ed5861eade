# Hostile, with no frame, no import and no dunder: when the triton interpreter first runs a @triton.jit
# function it copies its own module's globals into kernel.py's (NumPy as `np`, `inspect`...). After one honest
# launch, the name `np` is NumPy and computes ReLU into the output. The grammar refuses any name kernel.py does
# not define.
import triton
import triton.language as tl


@triton.jit
def _zero(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _zero[(triton.cdiv(n, 1024),)](outputs[0], n, BLOCK=1024)
    np.maximum(np.asarray(inputs[0]), 0, out=np.asarray(outputs[0]))  # noqa: F821
