# Hostile: the generator hidden in a lambda (a lambda whose body yields is a generator function) given as a
# default argument, with a mutable default to hand it itself; its running frame leads to the runner's builtins.
import triton
import triton.language as tl


@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)


def ks_kernel(inputs, outputs, attrs, box=[], peek=lambda box: (yield box[-1].gi_frame.f_back)):  # noqa: B006
    walker = peek(box)
    box.append(walker)
    frame = next(walker)
    while "open" not in frame.f_builtins:
        frame = frame.f_back
    np = frame.f_builtins["__import__"]("numpy")
    np.maximum(np.asarray(inputs[0]), 0, out=np.asarray(outputs[0]))
