"""Whether a removal taught something: the variant correct, and the original clearly faster than it (pure)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kernelsage.tools.results import Evaluation, ProfileResult, Timing
from kernelsage.tools.timing import clearly_faster_relative


@dataclass(frozen=True)
class Gain:
    """How many times slower the kernel is without the optimization: the ratio of the two kernels' times, each
    relative to the reference measured beside it, with the interval built from the ends of the four intervals."""

    ratio: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.ratio:.2f}x [{self.low:.2f}, {self.high:.2f}]"


@dataclass(frozen=True)
class Judgement:
    """A variant's verdict: `kept` as a lesson, or discarded with the reason."""

    status: str  # the evaluation's status (ok, compile_error, wrong_result, ...)
    correct: bool
    kept: bool
    reason: str
    gain: Gain | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "gain": self.gain.to_dict() if self.gain else None}

    @classmethod
    def from_dict(cls, data: dict) -> Judgement:
        gain = data.get("gain")
        return cls(**{**data, "gain": Gain(**gain) if gain else None})


def gain_of(original: Timing, original_reference: Timing, variant: Timing, variant_reference: Timing) -> Gain:
    """The variant's relative time over the original's, with a conservative interval (never narrower than the
    ratio of the intervals' ends)."""
    ratio = (variant.median / variant_reference.median) / (original.median / original_reference.median)
    low = (variant.ci_low / variant_reference.ci_high) / (original.ci_high / original_reference.ci_low)
    high = (variant.ci_high / variant_reference.ci_low) / (original.ci_low / original_reference.ci_high)
    return Gain(ratio, low, high)


def judge_removal(variant: Evaluation, original: ProfileResult | None) -> Judgement:
    """Kept when the variant is correct and the original, profiled right after it, beats it beyond the noise
    (`clearly_faster_relative`: intervals apart by the 5% floor for drift between two runs)."""
    status = variant.status.value
    if not variant.correct:
        return Judgement(status, False, False, _failure(variant, status))
    profiled = variant.profile
    if profiled is None or profiled.candidate is None or profiled.reference is None:
        return Judgement(status, True, False, "correct, but the backend gives no timing to compare")
    if original is None or original.candidate is None or original.reference is None:
        return Judgement(status, True, False, "correct, but the original could not be profiled beside it")
    gain = gain_of(original.candidate, original.reference, profiled.candidate, profiled.reference)
    if clearly_faster_relative(original.candidate, original.reference, profiled.candidate, profiled.reference):
        return Judgement(status, True, True, "measurably slower without it", gain)
    return Judgement(status, True, False, f"not measurably slower ({gain})", gain)


def _failure(variant: Evaluation, status: str) -> str:
    """Why an incorrect variant failed, in a few words (the status, and the first compiler error if any)."""
    compiled = variant.compile
    if not compiled.ok:
        first = next((m.message for m in compiled.errors if m.severity == "error"), compiled.reason)
        return f"does not compile{': ' + first[:160] if first else ''}"
    return f"incorrect ({status})"
