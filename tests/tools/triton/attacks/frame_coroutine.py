# Hostile: a coroutine sent into runs with a frame of its own (cr_frame) whose f_back is whoever resumed it; the
# chain leads to the runner's real builtins, then NumPy computes ReLU into the output.
import triton
import triton.language as tl


@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)


async def _peek(box):
    return box[0].cr_frame.f_back


def ks_kernel(inputs, outputs, attrs):
    box = []
    coroutine = _peek(box)
    box.append(coroutine)
    try:
        coroutine.send(None)
    except Exception as stop:  # StopIteration is not among the guarded builtins
        frame = stop.value
    while "open" not in frame.f_builtins:
        frame = frame.f_back
    np = frame.f_builtins["__import__"]("numpy")
    np.maximum(np.asarray(inputs[0]), 0, out=np.asarray(outputs[0]))
