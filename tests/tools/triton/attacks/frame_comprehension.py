# Hostile: a generator expression is a generator too: one that reads its own gi_frame while it runs finds its
# caller's frame, and from there the runner's real builtins; NumPy then computes ReLU into the output.
import triton
import triton.language as tl


@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)


def ks_kernel(inputs, outputs, attrs):
    box = []
    walker = (box[0].gi_frame.f_back for _ in range(1))
    box.append(walker)
    frame = [f for f in walker][0]  # noqa: RUF015  (a comprehension is the point)
    while "open" not in frame.f_builtins:
        frame = frame.f_back
    np = frame.f_builtins["__import__"]("numpy")
    np.maximum(np.asarray(inputs[0]), 0, out=np.asarray(outputs[0]))
