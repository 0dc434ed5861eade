"""Correctness of a kernel's outputs against the reference's (METHOD §8), as pure functions over tensors."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kernelsage.tasks.model import Tolerance
from kernelsage.tools.results import Mismatch, Status

MAX_REPORTED_MISMATCHES = 8

# Poison written into every output before a call: NaNs with a payload no arithmetic produces, so an element
# still holding it was never written. Integer outputs have no such value; their poison changes per trial, and an
# element whose right answer is the poison counts as written.
FLOAT_POISON_BITS: dict[torch.dtype, tuple[torch.dtype, int]] = {
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float64: (torch.int64, 0x7FF8DEADDEADBEEF),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
}
INT_POISONS = (0x5A5A5A5A, -0x21524111, 0x7BADBEEF)


def poison_value(dtype: torch.dtype, trial: int) -> tuple[torch.dtype, int]:
    """The dtype to view an output as, and the value in that view that marks an element as unwritten."""
    if dtype in FLOAT_POISON_BITS:
        return FLOAT_POISON_BITS[dtype]
    if dtype == torch.bool:
        return torch.uint8, 0x5A if trial % 2 == 0 else 0xA5  # neither 0 nor 1
    info = torch.iinfo(dtype)
    value = INT_POISONS[trial % len(INT_POISONS)]
    return dtype, info.min + (value - info.min) % (info.max - info.min + 1)


def poison(tensor: torch.Tensor, trial: int) -> None:
    """Fill an output buffer with the poison value for its dtype (the integer one varies with `trial`)."""
    view_dtype, value = poison_value(tensor.dtype, trial)
    tensor.view(view_dtype).fill_(value)


def poisoned_mask(tensor: torch.Tensor, trial: int) -> torch.Tensor:
    """Where `tensor` still holds the poison of `trial`."""
    view_dtype, value = poison_value(tensor.dtype, trial)
    return tensor.view(view_dtype) == value


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
    # Over the failing elements alone (0 when nothing failed): those whose reference is 0 have no relative
    # error and are counted instead; the largest |reference| gives their absolute error a scale.
    n_mismatch_zero_reference: int = 0
    max_rel_failing: float = 0.0
    max_abs_reference: float = 0.0


def compare_output(expected: torch.Tensor, actual: torch.Tensor, tolerance: Tolerance, trial: int,
                   output_index: int = 0) -> Comparison:
    """Compare one output: an element fails only when both its absolute and relative error exceed tolerance.

    |a - e| > rtol * |e| stands for rel > rtol without dividing (so |e| = 0 needs no special case). Work is
    done in float32 (float64 for float64 outputs), with sums accumulated in float64.
    """
    if tuple(expected.shape) != tuple(actual.shape):
        raise ValueError(f"output {output_index}: shape {list(actual.shape)} != expected {list(expected.shape)}")
    unwritten = poisoned_mask(actual, trial).reshape(-1)
    if expected.dtype == actual.dtype:
        # An integer poison can be a value the task produces (int8 holds only 256): where the reference's answer
        # is the poison itself, the element holds the right answer, written or not.
        unwritten &= ~poisoned_mask(expected.contiguous(), trial).reshape(-1)
    work = torch.float64 if expected.dtype == torch.float64 else torch.float32
    if expected.dtype == torch.bool or actual.dtype == torch.bool:
        # A bool byte other than 0/1 (e.g. the poison) must not read as true.
        exp = expected.reshape(-1).view(torch.uint8).to(work)
        act = actual.reshape(-1).view(torch.uint8).to(work)
    elif expected.is_floating_point():
        exp, act = expected.reshape(-1).to(work), actual.reshape(-1).to(work)
    else:  # integers: exact in float64
        exp, act = expected.reshape(-1).to(torch.float64), actual.reshape(-1).to(torch.float64)
    diff = (act - exp).abs_()
    magnitude = exp.abs()
    failed = (diff > tolerance.atol) & (diff > magnitude * tolerance.rtol)
    exp_finite, act_finite = torch.isfinite(exp), torch.isfinite(act)
    all_finite = bool(exp_finite.all()) and bool(act_finite.all())
    n_nonfinite = 0
    if not all_finite:
        nonfinite = exp_finite & ~act_finite
        # Non-finite references (NaN, +-Inf) must be reproduced exactly in kind.
        exp_nan, act_nan = torch.isnan(exp), torch.isnan(act)
        special_wrong = ~exp_finite & ~((exp_nan & act_nan) | (~exp_nan & (exp == act)))
        failed |= nonfinite | special_wrong
        n_nonfinite = int(torch.count_nonzero(nonfinite & ~unwritten))
        diff = torch.where(exp_finite & act_finite, diff, torch.zeros_like(diff))
    failed |= unwritten
    # Relative errors over elements with a non-zero, finite reference (masked division, no boolean gather).
    rel = diff / magnitude
    rel_valid = magnitude > 0
    if not all_finite:
        rel_valid &= exp_finite & act_finite
    rel = torch.where(rel_valid, rel, torch.zeros_like(rel))
    n_rel = int(torch.count_nonzero(rel_valid))
    n_mismatch = int(torch.count_nonzero(failed))
    failing = _failing_statistics(failed, exp, rel, exp_finite) if n_mismatch else {}
    positions = torch.nonzero(failed).reshape(-1)[:MAX_REPORTED_MISMATCHES].tolist()
    shape = tuple(expected.shape)
    mismatches = [Mismatch(output=output_index, index=_unravel(p, shape), expected=float(exp[p]),
                           actual=float(act[p])) for p in positions]
    return Comparison(
        n_elements=exp.numel(), n_mismatch=n_mismatch,
        n_unwritten=int(torch.count_nonzero(unwritten)),
        n_nonfinite=n_nonfinite,
        max_abs=float(diff.max()) if diff.numel() else 0.0, sum_abs=float(diff.sum(dtype=torch.float64)),
        max_rel=float(rel.max()) if n_rel else 0.0, sum_rel=float(rel.sum(dtype=torch.float64)),
        n_rel=n_rel, mismatches=mismatches, **failing,
    )


def _failing_statistics(failed: torch.Tensor, exp: torch.Tensor, rel: torch.Tensor,
                        exp_finite: torch.Tensor) -> dict[str, float | int]:
    """What the failing elements' errors mean: computed only for outputs that failed, so passing costs nothing."""
    finite_magnitude = torch.where(exp_finite, exp.abs(), torch.zeros_like(exp))
    return {
        "n_mismatch_zero_reference": int(torch.count_nonzero(failed & (exp == 0))),
        "max_rel_failing": float(torch.where(failed, rel, torch.zeros_like(rel)).max()),
        "max_abs_reference": float(finite_magnitude.max()) if finite_magnitude.numel() else 0.0,
    }


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


def all_close(expected: torch.Tensor, actual: torch.Tensor, tolerance: Tolerance) -> bool | None:
    """A quick full check: True when every element passes the rule of `compare_output` (and none is poison),
    False when some element fails, None when the reference has non-finite values (use `compare_output`).

    |a - e| <= max(atol, rtol * |e|) is the same rule, evaluated with a few passes and no mismatch bookkeeping.
    """
    if tuple(expected.shape) != tuple(actual.shape):
        return False
    if expected.dtype == torch.bool or not expected.is_floating_point():
        if tolerance.atol == 0 and tolerance.rtol == 0:
            return torch.equal(actual.reshape(-1).view(torch.uint8), expected.reshape(-1).view(torch.uint8)) \
                if expected.dtype == actual.dtype else False
        return None
    if same_bytes(expected, actual):
        return True  # bit for bit the reference's answer (NaN payloads included): one pass, nothing allocated
    work = torch.float64 if expected.dtype == torch.float64 else torch.float32
    exp, act = expected.to(work), actual.to(work)
    diff = torch.sub(act, exp).abs_()  # NaN (the poison included) fails every comparison below
    # Where the reference is +-inf, rtol * |e| is inf and any finite value would pass: -1 there makes every such
    # element fail here, and `compare_output` (which asks for the same infinity) decide.
    bound = exp.abs().mul_(tolerance.rtol).clamp_min_(tolerance.atol).nan_to_num_(posinf=-1.0)
    if bool(diff.le_(bound).all()):
        return True
    return None if not bool(torch.isfinite(exp).all()) else False


def same_bytes(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Whether two tensors of one dtype and shape hold the same bytes.

    memcmp for contiguous CPU tensors: torch.equal compares values on the intra-op thread pool, which on a busy
    two-core machine took 6-12 ms for 4M floats where memcmp took 1.6 ms, and a profile compares every call's
    whole output."""
    if first.dtype != second.dtype or first.shape != second.shape:
        return False
    first, second = first.contiguous(), second.contiguous()  # no copy for the outputs and references compared
    if _MEMCMP is None or first.device.type != "cpu" or second.device.type != "cpu":
        return torch.equal(first.reshape(-1).view(torch.uint8), second.reshape(-1).view(torch.uint8))
    size = first.numel() * first.element_size()
    return size == 0 or _MEMCMP(first.data_ptr(), second.data_ptr(), size) == 0


def _libc_memcmp() -> Callable[[int, int, int], int] | None:
    try:
        memcmp = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    memcmp.restype, memcmp.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return memcmp


_MEMCMP = _libc_memcmp()


def compare_at(expected: torch.Tensor, actual: torch.Tensor, positions: torch.Tensor, tolerance: Tolerance,
               trial: int) -> Comparison:
    """`compare_output` restricted to some flat positions (a sampled check of a large output)."""
    return compare_output(gather(expected, positions), gather(actual, positions), tolerance, trial)


def gather(tensor: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Elements at flat positions, bit for bit (a bool byte holding the poison stays the poison)."""
    flat = tensor.reshape(-1)
    if tensor.dtype == torch.bool:
        return flat.view(torch.uint8).index_select(0, positions).view(torch.bool)
    return flat.index_select(0, positions)  # far faster than flat[positions] on large tensors


def poison_at(tensor: torch.Tensor, positions: torch.Tensor, trial: int) -> None:
    """Write the poison of `trial` at some flat positions of a (contiguous) output."""
    view_dtype, value = poison_value(tensor.dtype, trial)
    tensor.reshape(-1).view(view_dtype).index_fill_(0, positions, value)
