"""Tunable Triton kernel for l3_matmul (`kernelsage tune --backend triton`): the tile sizes are autotune's
configurations, the first being the default. Correct for every configuration (checked by the interpreter, where
speed is not measured)."""

import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BM": 32, "BN": 32, "BK": 32}), triton.Config({"BM": 16, "BN": 32, "BK": 32}),
                          triton.Config({"BM": 32, "BN": 16, "BK": 16}), triton.Config({"BM": 64, "BN": 64, "BK": 16})],
                 key=["m", "n", "k"])
@triton.jit
def _kernel(a_ptr, b_ptr, c_ptr, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for start in range(0, k, BK):
        ks = start + tl.arange(0, BK)
        a = tl.load(a_ptr + rows[:, None] * k + ks[None, :], mask=(rows[:, None] < m) & (ks[None, :] < k), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * n + cols[None, :], mask=(ks[:, None] < k) & (cols[None, :] < n), other=0.0)
        acc += tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    mask = (rows[:, None] < m) & (cols[None, :] < n)
    tl.store(c_ptr + rows[:, None] * n + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    a, b = inputs
    m, k = a.shape
    n = b.shape[1]
    _kernel[lambda meta: (triton.cdiv(m, meta["BM"]), triton.cdiv(n, meta["BN"]))](a, b, outputs[0], m, n, k)
