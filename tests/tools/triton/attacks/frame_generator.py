# Hostile: a running generator's frame chain (gi_frame, f_back, f_globals / f_builtins) reaches the runner's
# frames, whose builtins are the real ones, without a dunder or a refused name; from there NumPy computes ReLU
# straight into the output. The list of refused names that guarded kernel.py before the allowlist grammar let
# this file through (the test says so); the grammar refuses gi_frame, f_back, f_globals, yield and next.
import triton
import triton.language as tl


@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)


def _frames():
    me = yield
    yield me.gi_frame.f_back  # while running, the generator's caller: _runner_frame


def _runner_frame():
    walker = _frames()
    next(walker)
    frame = walker.send(walker)
    while "open" not in frame.f_builtins:  # out of kernel.py's frames, whose builtins are the guarded ones
        frame = frame.f_back
    return frame


def ks_kernel(inputs, outputs, attrs):
    frame = _runner_frame()
    real_import = frame.f_globals.get("__import__") or frame.f_builtins["__import__"]
    np = real_import("numpy")
    np.maximum(np.asarray(inputs[0]), 0, out=np.asarray(outputs[0]))
