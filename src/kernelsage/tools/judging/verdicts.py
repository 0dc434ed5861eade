"""The judge's verdicts on what the runner did: one case's result, and the class of a runner that died.

Pure functions of what the judge observed (its own reference outputs, the shared output buffers, how the
runner's process ended); the runner's own words (a fault address) only ever choose among failure classes.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelsage.tasks.model import Tolerance
from kernelsage.tools.compare import classify, compare_output, matches
from kernelsage.tools.judging.arena import GUARD_BYTE, Placed, Region
from kernelsage.tools.results import CaseResult, Status
from kernelsage.tools.sandbox import signal_name

OutputCheck = Callable[[Sequence[torch.Tensor], Sequence[torch.Tensor]], bool]  # (expected, actual) -> passed
OUT_OF_MEMORY_WORDS = ("std::bad_alloc", "Cannot allocate memory", "out of memory", "MemoryError")


def classify_runner_exit(sig: int | None, code: int | None, *, fault: tuple[int, int] | None, inputs_base: int,
                         inputs_size: int, log: str, maxrss_kb: int, cpu_s: float, limits: Any) -> tuple[Status, str]:
    """Why the candidate's process ended by itself: a write to its inputs, a limit, a crash, an exit."""
    if fault is not None and inputs_base and inputs_base <= fault[1] < inputs_base + max(inputs_size, 1):
        return Status.INPUT_MODIFIED, (f"the kernel wrote to its inputs (byte {fault[1] - inputs_base} of the "
                                       f"input buffers, {signal_name(fault[0])}): inputs are read-only")
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= limits.cpu_s):
        return Status.TIMEOUT, f"killed after the CPU-time limit of {limits.cpu_s:g} s"
    if sig == signal.SIGXFSZ:
        return Status.RUNTIME_ERROR, (f"wrote more than the file-size limit ({limits.file_bytes >> 20} MiB) to "
                                      "stdout/stderr")
    if any(word in log for word in OUT_OF_MEMORY_WORDS) or (
            sig is not None and (sig == signal.SIGKILL or maxrss_kb * 1024 >= 0.75 * limits.memory_bytes)):
        return Status.OOM, f"ran out of memory (limit {limits.memory_bytes >> 20} MiB)"
    if sig is not None:
        where = f" at address {fault[1]:#x}" if fault is not None else ""
        return Status.RUNTIME_ERROR, f"crashed with {signal_name(sig)}{where}"
    return Status.RUNTIME_ERROR, f"exited with code {code} while serving calls"


def inputs_modified(shared: Sequence[torch.Tensor], private: Sequence[torch.Tensor], names: Sequence[str]) -> str:
    """'' when every shared input still holds, byte for byte, the judge's private copy; else which changed."""
    for index, (seen, kept) in enumerate(zip(shared, private, strict=True)):
        if seen.numel() and not torch.equal(seen.reshape(-1).view(torch.uint8), kept.reshape(-1).view(torch.uint8)):
            return f"input {index} ({names[index]}) changed during the call"
    return ""


def case_result(name: str, trial: int, code: int, expected: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
                tolerances: Sequence[Tolerance], previous: Sequence[torch.Tensor] | None,
                custom: OutputCheck | None = None) -> dict[str, Any]:
    """One case of one trial, compared over all outputs (METHOD §8); an answer equal to the previous trial's
    for this case (new inputs, old answer) is a cached result. `custom`, the suite's own precision rule where
    a task has one, replaces the element-wise tolerance (unwritten outputs still fail)."""
    if code != 0:
        return CaseResult(case=name, trial=trial, passed=False, status=Status.RUNTIME_ERROR,
                          message=f"ks_kernel returned {code}").to_dict()
    comparisons = [compare_output(e, a, t, trial, i)
                   for i, (e, a, t) in enumerate(zip(expected, outputs, tolerances, strict=True))]
    status = classify(comparisons)
    message = ""
    if custom is not None and status is not Status.PARTIAL_WRITE:
        status = Status.OK if custom(expected, outputs) else Status.WRONG_RESULT
        message = "" if status is Status.OK else "the task's own precision check (custom_check_precision) failed"
    if status is not Status.OK and previous is not None and matches(previous, outputs, tolerances, trial):
        status = Status.CACHED_RESULT
        message = "the outputs equal the previous call's answer for this case, not this call's"
    n_rel = sum(c.n_rel for c in comparisons)
    n_elements = sum(c.n_elements for c in comparisons)
    return CaseResult(
        case=name, trial=trial, passed=status is Status.OK, status=status, n_elements=n_elements,
        n_mismatch=sum(c.n_mismatch for c in comparisons), n_unwritten=sum(c.n_unwritten for c in comparisons),
        max_abs_error=max((c.max_abs for c in comparisons), default=0.0),
        mean_abs_error=sum(c.sum_abs for c in comparisons) / max(n_elements, 1),
        max_rel_error=max((c.max_rel for c in comparisons), default=0.0),
        mean_rel_error=sum(c.sum_rel for c in comparisons) / max(n_rel, 1),
        atol=max((t.atol for t in tolerances), default=0.0), rtol=max((t.rtol for t in tolerances), default=0.0),
        mismatches=[m for c in comparisons for m in c.mismatches][:8], message=message,
        n_mismatch_zero_reference=sum(c.n_mismatch_zero_reference for c in comparisons),
        max_rel_error_failing=max((c.max_rel_failing for c in comparisons), default=0.0),
        max_abs_reference=max((c.max_abs_reference for c in comparisons), default=0.0),
    ).to_dict()


def failed_case(name: str, trial: int, status: Status, message: str) -> dict[str, Any]:
    return CaseResult(case=name, trial=trial, passed=False, status=status, message=message).to_dict()


def arm_guards(region: Region, places: Sequence[Placed]) -> None:
    """Fill the guard bytes around these outputs before a call (`guard_breach` reads them after it)."""
    for guard in region.guards(places):
        guard.fill_(GUARD_BYTE)


def guard_breach(region: Region, places: Sequence[Placed]) -> str:
    """'' when the guard bytes around every output still hold what `arm_guards` wrote, else which were written:
    a write past an output's end (or before its start), which the comparison of the outputs alone never sees."""
    for index, guard in enumerate(region.guards(places)):
        changed = torch.nonzero(guard != GUARD_BYTE).reshape(-1)
        if changed.numel():
            first = int(changed[0])
            where = (f"{first + 1} bytes before output 0" if index == 0 else
                     f"{first + 1} bytes past the end of output {index - 1}")
            return f"the kernel wrote outside its outputs ({changed.numel()} guard bytes changed, the first {where})"
    return ""
