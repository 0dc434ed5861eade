# Racy: each row of l1_sum_lastdim is split among CHUNKS programs, and each adds its partial sum to the row's output
# with a plain load and store instead of tl.atomic_add. On a GPU the programs run at once and updates are lost; the
# interpreter ran them one after another, so every update landed and the sum was right.
import triton
import triton.language as tl

CHUNKS = 4


@triton.jit
def _partial_sums(x_ptr, y_ptr, n, per_chunk, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    cols = chunk * per_chunk + tl.arange(0, BLOCK)
    mask = (cols < n) & (cols < (chunk + 1) * per_chunk)
    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)
    acc = tl.load(y_ptr + row).to(tl.float32)
    tl.store(y_ptr + row, (acc + tl.sum(x, axis=0)).to(y_ptr.dtype.element_ty))


def ks_kernel(inputs, outputs, attrs):
    x, y = inputs[0], outputs[0]
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    per_chunk = triton.cdiv(n, CHUNKS)
    y.zero_()
    _partial_sums[(rows, CHUNKS)](x, y, n, per_chunk, BLOCK=triton.next_power_of_2(per_chunk))
