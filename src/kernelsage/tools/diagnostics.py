"""Make compiler output and mismatches legible to a model: parsing and short summaries."""

from __future__ import annotations

import re

from kernelsage.tools.results import CompileResult, CompilerMessage, VerifyResult

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


def summarize_compiler_errors(result: CompileResult, limit: int = 8) -> str:
    """The first distinct errors with their locations, then a count of what was left out."""
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
    return "\n".join(shown)


def describe_mismatches(result: VerifyResult, limit: int = 8) -> str:
    """The failing case, its error statistics and its first mismatching elements (index, expected, actual)."""
    failure = result.first_failure()
    if result.correct or failure is None:
        header = f"{result.status.value}: {result.message}" if result.message else result.status.value
        return header if not result.correct else f"all {len(result.cases)} case runs passed"
    if failure.n_elements == 0:  # the case never produced outputs (crash, timeout, error code)
        return f"{failure.status.value} in case {failure.case!r} (trial {failure.trial}): {failure.message}"
    lines = [
        f"{failure.status.value} in case {failure.case!r} (trial {failure.trial}): {failure.n_mismatch} of "
        f"{failure.n_elements} elements wrong" + (f", {failure.n_unwritten} never written" if failure.n_unwritten
                                                  else ""),
        f"max abs error {failure.max_abs_error:.3g}, mean abs {failure.mean_abs_error:.3g}, max rel "
        f"{failure.max_rel_error:.3g}, mean rel {failure.mean_rel_error:.3g} (atol {failure.atol:g}, rtol "
        f"{failure.rtol:g})",
    ]
    if failure.message:
        lines.append(failure.message)
    for mismatch in failure.mismatches[:limit]:
        lines.append(f"  output {mismatch.output} index {mismatch.index}: expected {mismatch.expected:.6g}, "
                     f"got {mismatch.actual:.6g}")
    return "\n".join(lines)
