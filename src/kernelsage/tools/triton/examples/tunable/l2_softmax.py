"""Tunable Triton kernel for l2_softmax (`kernelsage tune --backend triton`): ROWS rows per program and the warp
count are autotune's configurations, the first being the default. Correct for every configuration (checked by
the interpreter, where speed is not measured)."""

import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"ROWS": 1}, num_warps=4), triton.Config({"ROWS": 2}, num_warps=4),
                          triton.Config({"ROWS": 4}, num_warps=8)],
                 key=["rows", "n"])
@triton.jit
def _kernel(x_ptr, y_ptr, rows, n, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for offset in range(ROWS):
        row = tl.program_id(0) * ROWS + offset
        mask = (cols < n) & (row * n + cols < rows * n)  # the row exists (a block mask: the interpreter wants one)
        x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        tl.store(y_ptr + row * n + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    x = inputs[0]
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    _kernel[lambda meta: (triton.cdiv(rows, meta["ROWS"]),)](x, outputs[0], rows, n, BLOCK=triton.next_power_of_2(n))
