"""Correctness of a kernel's outputs against the reference's (METHOD §8), as pure functions over tensors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kernelsage.evals.tasks import Tolerance
from kernelsage.tools.results import Mismatch, Status

MAX_REPORTED_MISMATCHES = 8

# Poison written into every output before a call: NaNs with a payload no arithmetic produces, so an element
# still holding it was never written. Integer outputs have no such value; their poison changes per trial.
FLOAT_POISON_BITS: dict[torch.dtype, tuple[torch.dtype, int]] = {
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float64: (torch.int64, 0x7FF8DEADDEADBEEF),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
}
INT_POISONS = (0x5A5A5A5A, -0x21524111, 0x7BADBEEF)


def poison(tensor: torch.Tensor, trial: int) -> None:
    """Fill an output buffer with the poison value for its dtype (the integer one varies with `trial`)."""
    if tensor.dtype in FLOAT_POISON_BITS:
        bits_dtype, bits = FLOAT_POISON_BITS[tensor.dtype]
        tensor.view(bits_dtype).fill_(bits)
    elif tensor.dtype == torch.bool:
        tensor.view(torch.uint8).fill_(0x5A if trial % 2 == 0 else 0xA5)  # neither 0 nor 1
    else:
        info = torch.iinfo(tensor.dtype)
        value = INT_POISONS[trial % len(INT_POISONS)]
        tensor.fill_(info.min + (value - info.min) % (info.max - info.min + 1))


def poisoned_mask(tensor: torch.Tensor, trial: int) -> torch.Tensor:
    """Where `tensor` still holds the poison of `trial`."""
    reference = torch.empty_like(tensor)
    poison(reference, trial)
    if tensor.dtype in FLOAT_POISON_BITS:
        bits_dtype, _ = FLOAT_POISON_BITS[tensor.dtype]
        return tensor.view(bits_dtype) == reference.view(bits_dtype)
    if tensor.dtype == torch.bool:
        return tensor.view(torch.uint8) == reference.view(torch.uint8)
    return tensor == reference


@dataclass(frozen=True)
class Comparison:
    """Errors of one output; statistics over elements where both values are finite."""

    n_elements: int
    n_mismatch: int
    n_unwritten: int
    n_nonfinite: int  # NaN/Inf in the output where the reference is finite
    max_abs: float
    sum_abs: float
    max_rel: float
    sum_rel: float
    n_rel: int
    mismatches: list[Mismatch]


def compare_output(expected: torch.Tensor, actual: torch.Tensor, tolerance: Tolerance, trial: int,
                   output_index: int = 0) -> Comparison:
    """Compare one output: an element fails only when both its absolute and relative error exceed tolerance."""
    if tuple(expected.shape) != tuple(actual.shape):
        raise ValueError(f"output {output_index}: shape {list(actual.shape)} != expected {list(expected.shape)}")
    unwritten = poisoned_mask(actual, trial).reshape(-1)
    if expected.dtype == torch.bool or actual.dtype == torch.bool:
        # A bool byte other than 0/1 (e.g. the poison) must not read as true.
        exp = expected.reshape(-1).view(torch.uint8).to(torch.float64)
        act = actual.reshape(-1).view(torch.uint8).to(torch.float64)
    else:
        exp = expected.reshape(-1).to(torch.float64)
        act = actual.reshape(-1).to(torch.float64)
    exp_finite, act_finite = torch.isfinite(exp), torch.isfinite(act)
    both = exp_finite & act_finite
    abs_err = torch.where(both, (act - exp).abs(), torch.zeros_like(exp))
    magnitude = exp.abs()
    rel_valid = both & (magnitude > 0)
    rel_err = torch.where(rel_valid, abs_err / torch.where(rel_valid, magnitude, torch.ones_like(exp)),
                          torch.where(abs_err > 0, torch.full_like(exp, float("inf")), torch.zeros_like(exp)))
    too_far = both & (abs_err > tolerance.atol) & (rel_err > tolerance.rtol)
    nonfinite = exp_finite & ~act_finite
    # Non-finite references (NaN, +-Inf) must be reproduced exactly in kind.
    exp_nan, act_nan = torch.isnan(exp), torch.isnan(act)
    special_wrong = ~exp_finite & ~((exp_nan & act_nan) | (~exp_nan & (exp == act)))
    failed = too_far | nonfinite | special_wrong | unwritten
    positions = torch.nonzero(failed).reshape(-1)[:MAX_REPORTED_MISMATCHES].tolist()
    shape = tuple(expected.shape)
    mismatches = [Mismatch(output=output_index, index=_unravel(p, shape), expected=float(exp[p]),
                           actual=float(act[p])) for p in positions]
    return Comparison(
        n_elements=exp.numel(), n_mismatch=int(failed.sum()), n_unwritten=int(unwritten.sum()),
        n_nonfinite=int((nonfinite & ~unwritten).sum()),
        max_abs=float(abs_err.max()) if abs_err.numel() else 0.0, sum_abs=float(abs_err.sum()),
        max_rel=float(rel_err[rel_valid].max()) if bool(rel_valid.any()) else 0.0,
        sum_rel=float(rel_err[rel_valid].sum()), n_rel=int(rel_valid.sum()), mismatches=mismatches,
    )


def _unravel(position: int, shape: tuple[int, ...]) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(position % size)
        position //= size
    return list(reversed(index))


def classify(comparisons: Sequence[Comparison]) -> Status:
    """The failure class of a case from its outputs' comparisons (OK when nothing failed)."""
    if all(c.n_mismatch == 0 for c in comparisons):
        return Status.OK
    if any(c.n_unwritten for c in comparisons):
        return Status.PARTIAL_WRITE
    if any(c.n_nonfinite for c in comparisons):
        return Status.NAN_INF
    return Status.WRONG_RESULT


def matches(expected: Sequence[torch.Tensor], actual: Sequence[torch.Tensor], tolerances: Sequence[Tolerance],
            trial: int) -> bool:
    """Whether every output matches (used to recognise an answer cached from an earlier call)."""
    return all(e.shape == a.shape and compare_output(e, a, t, trial).n_mismatch == 0
               for e, a, t in zip(expected, actual, tolerances, strict=True))
