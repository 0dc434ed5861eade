"""Tunable Triton kernel for l2_add_rms_norm (`kernelsage tune --backend triton`): s = x + residual; out0 = s /
sqrt(mean(s^2) + eps) * weight; out1 = s. ROWS rows per program and the warp count are autotune's
configurations, the first being the default. Correct for every configuration (checked by the interpreter, where
speed is not measured)."""

import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"ROWS": 1}, num_warps=4), triton.Config({"ROWS": 2}, num_warps=4),
                          triton.Config({"ROWS": 4}, num_warps=8)],
                 key=["rows", "n"])
@triton.jit
def _kernel(x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, rows, n, eps, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + cols, mask=cols < n, other=0.0).to(tl.float32)
    for offset in range(ROWS):
        row = tl.program_id(0) * ROWS + offset
        mask = (cols < n) & (row * n + cols < rows * n)  # the row exists (a block mask: the interpreter wants one)
        s = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32) + \
            tl.load(r_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(s * s, axis=0) / n + eps)
        tl.store(s_ptr + row * n + cols, s.to(s_ptr.dtype.element_ty), mask=mask)
        tl.store(y_ptr + row * n + cols, (s * scale * w).to(y_ptr.dtype.element_ty), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    x, residual, weight = inputs
    n = x.shape[-1]
    rows = x.numel() // n if n else 0
    _kernel[lambda meta: (triton.cdiv(rows, meta["ROWS"]),)](x, residual, weight, outputs[0], outputs[1], rows, n,
                                                             attrs["eps"], BLOCK=triton.next_power_of_2(n))
