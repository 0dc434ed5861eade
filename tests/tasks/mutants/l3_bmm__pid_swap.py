"""Mutant of the l3_bmm Triton example: the row and column blocks read each other's program id."""

import triton
import triton.language as tl


@triton.jit
def _kernel(a_ptr, b_ptr, c_ptr, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    batch = tl.program_id(2)
    a_ptr += batch * m * k
    b_ptr += batch * k * n
    c_ptr += batch * m * n
    rows = tl.program_id(1) * BM + tl.arange(0, BM)
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
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
    batch, m, k = a.shape
    n = b.shape[2]
    _kernel[(triton.cdiv(m, 32), triton.cdiv(n, 32), batch)](a, b, outputs[0], m, n, k, BM=32, BN=32, BK=32)
