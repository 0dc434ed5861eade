"""The element-wise precision rule of METHOD §8 on plain tensors, for task files that check their own outputs.

An element fails only when both its absolute and its relative error exceed the tolerances; any NaN or Inf
fails. NPUKernelBench task files call a helper of this shape (`check_precision(outputs, outputs_new,
max_abs_error, max_rel_error) -> (ok, abs_diff, rel_diff)`) inside their `custom_check_precision`; the
suite's stand-in `framework.utils` serves this function. The kernel comparison itself (with mismatch
reports and poison checks) is `kernelsage.tools.compare`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

RELATIVE_FLOOR = 1e-7  # keeps the relative error finite where the expected value is zero


def _as_list(value: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [value] if isinstance(value, torch.Tensor) else list(value)


def check_precision(expected: torch.Tensor | Sequence[torch.Tensor], actual: torch.Tensor | Sequence[torch.Tensor],
                    max_abs_error: float, max_rel_error: float) -> tuple[int, torch.Tensor, torch.Tensor]:
    """1 when every element of every output passes (else 0), and all absolute and relative errors, flat."""
    ok = True
    abs_parts, rel_parts = [], []
    for want, got in zip(_as_list(expected), _as_list(actual), strict=True):
        want, got = want.detach().cpu(), got.detach().cpu()
        if want.dtype == torch.bool or got.dtype == torch.bool:
            want, got = want.to(torch.int64), got.to(torch.int64)
        want, got = want.to(torch.float64), got.to(torch.float64)
        abs_error = (want - got).abs()
        rel_error = abs_error / (want.abs() + RELATIVE_FLOOR)
        finite = bool(torch.isfinite(want).all() and torch.isfinite(got).all())
        if not finite or bool(((abs_error > max_abs_error) & (rel_error > max_rel_error)).any()):
            ok = False
        abs_parts.append(abs_error.reshape(-1))
        rel_parts.append(rel_error.reshape(-1))
    return int(ok), torch.cat(abs_parts), torch.cat(rel_parts)
