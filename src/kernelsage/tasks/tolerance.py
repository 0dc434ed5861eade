"""Correctness tolerances: each suite's own rule, and a stricter one chosen for a run.

kernelsage judges an element wrong only when both its absolute and its relative error exceed the tolerance
(METHOD §8; `kernelsage.tools.compare`). The numbers come from the suite the task belongs to, as its own
evaluation code sets them (docs/suites.md, "Tolerances"):

- NPUKernelBench: atol = rtol = 1e-3 for every dtype, with the same both-must-exceed rule (its
  `base_config.yaml` `eval.max_abs_error` / `max_rel_error`, used by `framework/utils.py` `check_precision`).
- KernelBench: as the checkout's own `eval.py` sets it (`loaders/kernelbench_rule.py` reads it): atol = rtol
  = 1e-2 for every output in its published versions (v0 and v0.1, `src/eval.py`: `torch.allclose(output,
  output_new, atol=1e-02, rtol=1e-02)`, KERNELBENCH_RULE, also chosen by name), 1e-4 for fp32 and 1e-2 for the
  half types in its 0.2 development code (`src/kernelbench/eval.py`).
- MultiKernelBench: atol = rtol = 1e-4 (`utils/correctness.py`: `torch.allclose(..., atol=1e-04, rtol=1e-04)`).
- kernelsage's own suite: 1e-3 for 32- and 64-bit floats, looser for the half types (METHOD §8).

KernelBench and MultiKernelBench use `torch.allclose` (|a - e| <= atol + rtol * |e|): with the same numbers,
kernelsage's rule (|a - e| <= max(atol, rtol * |e|)) accepts nothing they reject, and is at most twice as
strict. Integer and boolean outputs must match exactly everywhere: a stricter choice than the suites' float
formulas, which would let an integer be off by one once its magnitude reaches 99 (KernelBench) or 1000
(NPUKernelBench), an accident of applying a float rule to integers.

A run may tighten the rule (`--tolerance ATOL[,RTOL]`, KERNELSAGE_TOLERANCE), never loosen it: a result
judged correct must also be correct by the suite's own rule, or the suite's numbers would not compare.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernelsage.errors import ConfigurationError

TOLERANCE_ENV = "KERNELSAGE_TOLERANCE"


@dataclass(frozen=True)
class Tolerance:
    """An element fails only when BOTH its absolute and its relative error exceed these (METHOD §8)."""

    atol: float
    rtol: float

    def describe(self) -> str:
        return "exact" if self == EXACT else f"atol {self.atol:g}, rtol {self.rtol:g}"

    def looser_than(self, other: Tolerance) -> bool:
        """Whether this accepts some error that `other` rejects (either bound larger)."""
        return self.atol > other.atol or self.rtol > other.rtol


EXACT = Tolerance(0.0, 0.0)
# The dtypes a tolerance applies to; the others (integers, bool) must match exactly.
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
EXACT_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")


@dataclass(frozen=True)
class ToleranceRule:
    """A suite's tolerances by dtype, and where they come from."""

    suite: str
    floats: Mapping[str, Tolerance]  # by floating dtype; every dtype of FLOAT_DTYPES is listed
    source: str
    name: str = ""  # which of the suite's rules, where it has several (KernelBench: "checkout" or "published")

    def table(self) -> dict[str, Tolerance]:
        """Every dtype's tolerance: the floats', and exact integers and booleans."""
        return {**dict(self.floats), **{dtype: EXACT for dtype in EXACT_DTYPES}}


def _every_float(tolerance: Tolerance) -> dict[str, Tolerance]:
    return {dtype: tolerance for dtype in FLOAT_DTYPES}


KERNELSAGE_RULE = ToleranceRule(
    "kernelsage", {"float16": Tolerance(1e-2, 1e-2), "bfloat16": Tolerance(2e-2, 2e-2),
                   **{dtype: Tolerance(1e-3, 1e-3) for dtype in ("float32", "float64", "complex64", "complex128")}},
    "METHOD §8: 1e-3 for 32- and 64-bit floats; the half types carry fewer mantissa bits")
KERNELBENCH_RULE = ToleranceRule(
    "KernelBench", _every_float(Tolerance(1e-2, 1e-2)),
    "v0 and v0.1, src/eval.py: torch.allclose(atol=1e-02, rtol=1e-02) on every output", "published")
MULTIKERNELBENCH_RULE = ToleranceRule(
    "MultiKernelBench", _every_float(Tolerance(1e-4, 1e-4)),
    "utils/correctness.py: torch.allclose(atol=1e-04, rtol=1e-04), bool outputs exact")
NPUKERNELBENCH_RULE = ToleranceRule(
    "NPUKernelBench", _every_float(Tolerance(1e-3, 1e-3)),
    "base_config.yaml: eval.max_abs_error = eval.max_rel_error = 0.001 for every dtype "
    "(framework/utils.py check_precision)")

SUITE_RULES: dict[str, ToleranceRule] = {
    "suite": KERNELSAGE_RULE, "kernelbench": KERNELBENCH_RULE, "multikernelbench": MULTIKERNELBENCH_RULE,
    "npukernelbench": NPUKERNELBENCH_RULE,
}


def suite_rule(format: str) -> ToleranceRule:
    """The tolerance rule of a task format (`TaskOrigin.format`); kernelsage's own for anything else."""
    return SUITE_RULES.get(format, KERNELSAGE_RULE)


# A tolerance given for a run ---------------------------------------------------------------------------------

_NUMBER = r"\s*(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)\s*"


def parse_tolerance(text: str) -> Tolerance:
    """'1e-4' (atol = rtol) or '1e-4,1e-5' (atol, rtol) -> a Tolerance; anything else a one-line error."""
    match = re.fullmatch(_NUMBER + r"(?:," + _NUMBER + r")?", text or "")
    if not match:
        raise ConfigurationError(f"tolerance {text!r}: give ATOL or ATOL,RTOL as non-negative numbers, "
                                 "e.g. 1e-4 or 1e-4,1e-5")
    atol = float(match.group(1))
    return Tolerance(atol, float(match.group(2)) if match.group(2) else atol)


def run_tolerance(given: str | Tolerance | None) -> Tolerance | None:
    """The tolerance a run asks for: the argument, else KERNELSAGE_TOLERANCE, else None (the suite's rule)."""
    if isinstance(given, Tolerance):
        return given
    text = given if given is not None else os.environ.get(TOLERANCE_ENV) or None
    return None if text is None else parse_tolerance(text)


def tightened(table: Mapping[str, Tolerance], tolerance: Tolerance, *, task_id: str, rule: str) -> dict[str, Tolerance]:
    """`table` with `tolerance` for every dtype that is not exact; refused (ConfigurationError) where it is
    looser than the table for any of them, since a run may only make the suite's rule stricter."""
    for dtype, own in table.items():
        if own != EXACT and tolerance.looser_than(own):
            raise ConfigurationError(
                f"tolerance {tolerance.describe()} is looser than {rule}'s rule for {task_id} ({own.describe()} "
                f"for {dtype}); a run may only make it stricter")
    return {dtype: own if own == EXACT else tolerance for dtype, own in table.items()}


def describe_table(table: Mapping[str, Tolerance]) -> str:
    """'floats: atol 0.001, rtol 0.001; integers and bool: exact': dtypes grouped by equal tolerance, a whole
    family named as one."""
    groups: dict[Tolerance, list[str]] = {}
    for dtype, tolerance in table.items():
        groups.setdefault(tolerance, []).append(dtype)
    families = {frozenset(FLOAT_DTYPES): "floats", frozenset(EXACT_DTYPES): "integers and bool"}
    return "; ".join(f"{families.get(frozenset(dtypes), ', '.join(dtypes))}: {tolerance.describe()}"
                     for tolerance, dtypes in groups.items())
