"""Make compiler output and mismatches legible to a model: parsing and short summaries.

Compiler feedback is read errors first: a log is kept from its start (where the first errors are), its
messages are ordered by severity (errors, then warnings, then notes; log order within each), and "the
first error" is the first message of severity error, never a warning or a note.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kernelsage.tools.results import CaseResult, CompileResult, CompilerMessage, Mismatch, VerifyResult

GCC_LINE = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<column>\d+): "
                      r"(?P<severity>fatal error|error|warning|note): (?P<message>.*)$")
LINKER_LINE = re.compile(r"^(?P<file>[^:\n]*?)(?::\(.*?\))?: ?(?P<message>(undefined reference|undefined symbol|"
                         r"multiple definition|cannot find|.*required by --require-defined).*)$")


def parse_compiler_output(log: str) -> list[CompilerMessage]:
    """The diagnostics of a gcc/clang log, in order (linker errors get line 0)."""
    messages = []
    for raw in log.splitlines():
        match = GCC_LINE.match(raw)
        if match:
            severity = "error" if match["severity"] == "fatal error" else match["severity"]
            messages.append(CompilerMessage(file=match["file"], line=int(match["line"]),
                                            column=int(match["column"]), severity=severity,
                                            message=match["message"].strip()))
            continue
        match = LINKER_LINE.match(raw)
        if match or "collect2: error" in raw or raw.startswith("/usr/bin/ld:"):
            messages.append(CompilerMessage(file=match["file"] if match else "", line=0, column=0,
                                            severity="error", message=(match["message"] if match else raw).strip()))
    return messages


SEVERITY_RANK = {"error": 0, "warning": 1, "note": 2}


def by_severity(messages: Iterable[CompilerMessage]) -> list[CompilerMessage]:
    """Errors first, then warnings, then notes (and anything else); log order within each severity."""
    return sorted(messages, key=lambda m: SEVERITY_RANK.get(m.severity, len(SEVERITY_RANK)))


def first_error(messages: Iterable[CompilerMessage]) -> CompilerMessage | None:
    """The first message of severity error (None when the compiler reported none)."""
    return next((m for m in messages if m.severity == "error"), None)


def keep_start(log: str, limit: int, *, tail: int = 2_000) -> str:
    """`log` if it fits in `limit` characters, else its start (where the first errors are) and its last
    `tail` characters (the linker's summary), around a line that says how much was left out."""
    if len(log) <= limit:
        return log
    tail = min(tail, limit // 4)
    head = log[:max(0, limit - tail - 80)]
    head = head[:head.rfind("\n") + 1] or head  # whole lines where possible
    end = log[len(log) - tail:]
    end = end[end.find("\n") + 1:] if "\n" in end[:-1] else end
    return f"{head}[... {len(log) - len(head) - len(end)} characters of compiler output left out ...]\n{end}"


def summarize_compiler_errors(result: CompileResult, limit: int = 8) -> str:
    """The first distinct errors with their locations (log order), then counts of what was left out."""
    if result.ok:
        return "compiled without errors" + (f" ({sum(m.severity == 'warning' for m in result.errors)} warnings)"
                                            if result.errors else "")
    if result.reason:
        return f"rejected before compiling: {result.reason}"
    errors = [m for m in result.errors if m.severity == "error"]
    if not errors:
        tail = "\n".join(result.log.strip().splitlines()[-limit:])
        return f"{result.status.value}: {tail}" if tail else result.status.value
    seen, lines = set(), []
    for message in errors:
        key = (message.file, message.line, message.message)
        if key in seen:
            continue
        seen.add(key)
        where = f"{message.file}:{message.line}:{message.column}" if message.line else message.file or "link"
        lines.append(f"{where}: {message.message}")
    shown = lines[:limit]
    if len(lines) > limit:
        shown.append(f"... and {len(lines) - limit} more errors")
    warnings = sum(m.severity == "warning" for m in result.errors)
    if warnings:
        shown.append(f"({warnings} warning{'s' if warnings != 1 else ''} not shown)")
    return "\n".join(shown)


def mismatch_statistics(failure: CaseResult) -> list[str]:
    """What failed in a case that produced outputs, in words that hold where the reference is 0: how many
    elements failed (and what share), the largest absolute error, the relative error over the failing
    elements where it exists, and how many failing elements have a zero reference (no relative error
    there: their absolute error is named against the largest |reference|)."""
    if failure.n_mismatch == 0:  # failed by another rule (the task's own precision check): give the errors
        return [f"no element exceeds the element-wise tolerance (atol {failure.atol:g}, rtol {failure.rtol:g})",
                f"max abs error {failure.max_abs_error:.3g}; max rel error {failure.max_rel_error:.3g} over the "
                "elements whose expected value is non-zero"]
    lines = [f"{failure.n_mismatch:,} of {failure.n_elements:,} elements wrong ({failure.mismatch_fraction:.1%})"
             + (f", {failure.n_unwritten:,} never written" if failure.n_unwritten else "")]
    absolute = f"max abs error {failure.max_abs_error:.3g}, mean abs error {failure.mean_abs_error:.3g} over all elements"
    if failure.max_abs_reference is not None:
        absolute += f" (largest |expected| {failure.max_abs_reference:.3g})"
    lines.append(f"{absolute}; tolerance atol {failure.atol:g}, rtol {failure.rtol:g}: an element fails when "
                 "both its absolute and its relative error exceed them")
    zero = failure.n_mismatch_zero_reference
    if failure.max_rel_error_failing is not None and zero is not None:
        # Both parts always, counts included: the wording must not depend on the random inputs of the run.
        lines.append(f"max rel error {failure.max_rel_error_failing:.3g} over the {failure.n_mismatch - zero:,} "
                     f"wrong elements whose expected value is non-zero; {zero:,} wrong elements have expected "
                     "value 0 (no relative error there; see their absolute error)")
    else:  # a record without the failing-element statistics: say what the overall figures cover
        lines.append(f"max rel error {failure.max_rel_error:.3g}, mean {failure.mean_rel_error:.3g}, over all "
                     "elements whose expected value is non-zero (elements expected to be 0 have none)")
    return lines


def describe_mismatches(result: VerifyResult, limit: int = 8) -> str:
    """The failing case, its error statistics (`mismatch_statistics`) and its first mismatching elements
    (output, index, got, expected)."""
    failure = result.first_failure()
    if result.correct or failure is None:
        header = f"{result.status.value}: {result.message}" if result.message else result.status.value
        return header if not result.correct else f"all {len(result.cases)} case runs passed"
    where = f"{failure.status.value} in case {failure.case!r} (trial {failure.trial})"
    if failure.n_elements == 0:  # the case never produced outputs (crash, timeout, error code)
        return f"{where}: {failure.message}"
    statistics = mismatch_statistics(failure)
    lines = [f"{where}: {statistics[0]}", *statistics[1:]]
    if failure.message:
        lines.append(failure.message)
    if failure.mismatches[:limit]:
        lines.append("first wrong elements:")
    lines += [f"  {describe_mismatch(m)}" for m in failure.mismatches[:limit]]
    return "\n".join(lines)


def describe_mismatch(mismatch: Mismatch) -> str:
    """One failing element: which output, where, what came back and what was expected."""
    return f"output {mismatch.output} index {mismatch.index}: got {mismatch.actual:.6g}, expected {mismatch.expected:.6g}"
