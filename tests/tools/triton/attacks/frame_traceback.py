# Hostile: a caught exception's traceback (e.__traceback__.tb_frame) is a frame; its f_back chain leads out of
# kernel.py to the runner's real builtins, then NumPy computes ReLU into the output.
import triton
import triton.language as tl


@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)


def ks_kernel(inputs, outputs, attrs):
    try:
        1 // 0  # noqa: B018
    except Exception as error:  # ZeroDivisionError is not among the guarded builtins
        frame = error.__traceback__.tb_frame
    while "open" not in frame.f_builtins:
        frame = frame.f_back
    np = frame.f_builtins["__import__"]("numpy")
    np.maximum(np.asarray(inputs[0]), 0, out=np.asarray(outputs[0]))
