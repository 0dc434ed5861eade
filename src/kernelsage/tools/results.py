"""What a backend returns: plain, serialisable records the agent graph can keep in its state."""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Status(str, Enum):
    """The outcome class of one compile, verify or profile step (what the diagnostician reacts to)."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    WRONG_RESULT = "wrong_result"
    PARTIAL_WRITE = "partial_write"  # some output elements still hold the poison the harness wrote
    NAN_INF = "nan_inf"  # NaN or Inf where the reference has a finite value
    RUNTIME_ERROR = "runtime_error"  # segfault, abort, non-zero return code
    TIMEOUT = "timeout"
    OOM = "oom"
    FORBIDDEN = "forbidden"  # a safeguard rejected the candidate
    CACHED_RESULT = "cached_result"  # the kernel returned the previous call's answer
    INPUT_MODIFIED = "input_modified"  # the kernel wrote to (or tried to write to) its read-only inputs
    HARNESS_ERROR = "harness_error"  # the task or the harness failed, not the candidate


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, use_enum_values=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (enums as their string values)."""
        return self.model_dump(mode="json")


class Candidate(Record):
    """What the model wrote: named source files for one task."""

    task_id: str
    files: dict[str, str]

    @property
    def content_hash(self) -> str:
        """A short hash of the files (names and contents), the same whatever their order."""
        return content_hash(self.files)


def content_hash(files: dict[str, str]) -> str:
    """A short hash of named source files, the same whatever their order."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


class Artifact(Record):
    """A built candidate: where the backend can find it again."""

    backend: str
    path: str
    key: str
    sha256: str = ""  # of the library at `path`; checked before every use


class CompilerMessage(Record):
    """One diagnostic parsed from the compiler's output."""

    file: str
    line: int
    column: int
    severity: str
    message: str


class CompileResult(Record):
    ok: bool
    status: Status
    log: str = ""
    errors: list[CompilerMessage] = Field(default_factory=list)
    seconds: float = 0.0
    artifact: Artifact | None = None
    cached: bool = False
    reason: str = ""  # why a safeguard rejected the candidate


class Mismatch(Record):
    """One element that failed: which output, where, what was expected and what came back."""

    output: int
    index: list[int]
    expected: float
    actual: float


class CaseResult(Record):
    """One test case in one trial, compared over all of the kernel's outputs."""

    case: str
    trial: int
    passed: bool
    status: Status
    n_elements: int = 0
    n_mismatch: int = 0
    n_unwritten: int = 0
    max_abs_error: float = 0.0
    mean_abs_error: float = 0.0
    max_rel_error: float = 0.0  # over all elements whose reference is finite and non-zero
    mean_rel_error: float = 0.0  # likewise
    atol: float = 0.0
    rtol: float = 0.0
    mismatches: list[Mismatch] = Field(default_factory=list)  # the first failing elements, in flat order
    message: str = ""
    # Statistics of the failing elements alone (None: not measured, e.g. a record from an older version).
    # Where the reference is 0 no relative error exists: those elements are counted, and the largest |reference|
    # names the scale their absolute error is to be read against.
    n_mismatch_zero_reference: int | None = None  # failing elements whose reference is exactly 0
    max_rel_error_failing: float | None = None  # max |got - expected| / |expected| over failing, expected != 0
    max_abs_reference: float | None = None  # the largest finite |reference| in the case's outputs

    @property
    def mismatch_fraction(self) -> float:
        """The share of elements that failed (0 when the case produced no outputs)."""
        return self.n_mismatch / self.n_elements if self.n_elements else 0.0


class VerifyResult(Record):
    status: Status
    correct: bool
    cases: list[CaseResult] = Field(default_factory=list)
    trials: int = 0
    seed: int = 0
    seconds: float = 0.0
    message: str = ""
    stderr_tail: str = ""

    def first_failure(self) -> CaseResult | None:
        return next((case for case in self.cases if not case.passed), None)


class Timing(Record):
    """Latency statistics of one callable, in seconds per run."""

    mean: float
    median: float
    cv: float  # coefficient of variation (stdev / mean) of the timed runs
    minimum: float
    warmup: int
    reps: int
    stdev: float = 0.0
    ci_low: float = 0.0  # ~95% interval of the median (order statistics); 0 when not measured
    ci_high: float = 0.0


class ProfileResult(Record):
    """The performance case: both sides timed, or (`timed` False: an interpreter) only the output checked, with
    no timing and no speedup at all."""

    status: Status
    ok: bool
    case: str = ""
    candidate: Timing | None = None
    reference: Timing | None = None
    speedup: float | None = 0.0  # reference mean / candidate mean (METHOD §8 reports means); None: not timed
    timed: bool = True  # False: the device cannot time (the triton interpreter); candidate/reference/speedup None
    output_correct: bool = False  # the candidate's output on the performance case matched the reference
    threads: int = 0
    seconds: float = 0.0
    message: str = ""
    stderr_tail: str = ""
    input_sets: int = 0  # independent input sets the timed calls rotated over
    fresh_inputs: bool = False  # every timed call had contents no call had before (cpu profile, see profile.py)
    round_trip_s: float = 0.0  # the judge's measured cost of an empty request, subtracted from each call
    unseen_calls: int = 0  # timed calls given a whole instance no call had before (cpu profile, see profile.py)
    contents: str = ""  # what the timed calls' inputs were: elementwise / whole blends, or repeated sets


class Evaluation(Record):
    """One candidate through the backend: compile, then verify, then profile, up to the first step that failed.

    `correct` means verified on every case and profiled with a matching output; latencies are the
    profile's medians in seconds per run (the profile keeps the means too): a kernel that is fast on a minority
    of its calls moves a mean, not a median. An untimed profile (an interpreter) leaves both latencies None
    even when the kernel is correct (`untimed` tells the two apart).
    """

    status: Status
    correct: bool = False
    latency: float | None = None
    reference_latency: float | None = None
    compile: CompileResult
    verify: VerifyResult | None = None
    profile: ProfileResult | None = None

    @property
    def compiled(self) -> bool:
        return self.compile.ok

    @property
    def untimed(self) -> bool:
        """Profiled on a device that does not time (an interpreter): correct or not, no latency."""
        return self.profile is not None and not self.profile.timed
