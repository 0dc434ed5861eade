"""The diagnostics of an Ascend build log (bisheng, ccec, ld.lld, cmake, make, msopgen) as the same
structured `CompilerMessage`s the cpu backend returns.

bisheng and ccec are clang-based and print `file:line:col: severity: message`, which the shared gcc/clang
parser reads; this module adds the lld, cmake, make and CANN tool formats, and names files as the candidate
does (`op_kernel/add_custom.cpp`, not the path inside the generated project).
"""

from __future__ import annotations

import re

from kernelsage.tools.diagnostics import GCC_LINE, parse_compiler_output
from kernelsage.tools.results import CompilerMessage

LLD_LINE = re.compile(r"^(?:\S*ld(?:\.lld)?|lld): error: (?P<message>.*)$")
CMAKE_AT = re.compile(r"^CMake (?P<severity>Error|Warning)(?: \(dev\))? at (?P<file>[^:\n]+):(?P<line>\d+)"
                      r"(?: \((?P<command>[^)]*)\))?:\s*$")
CMAKE_PLAIN = re.compile(r"^CMake Error: (?P<message>.*)$")
MAKE_FAILED = re.compile(r"^(?:g?make(?:\[\d+\])?|ninja): \*\*\* (?P<message>.*)$")
TOOL_ERROR = re.compile(r"^\s*(?:\[ERROR\]|ERROR:)\s*(?P<message>.+)$")
CANDIDATE_PATH = re.compile(r"^(?:.*/)?(?P<name>(?:op_host|op_kernel)/[^/]+|kernel\.cpp|[^/]+\.(?:h|hpp))$")


def candidate_name(path: str) -> str:
    """A file as the candidate names it (paths into the build tree lose their prefix)."""
    match = CANDIDATE_PATH.match(path.strip())
    return match["name"] if match else path.strip()


def _renamed(message: CompilerMessage) -> CompilerMessage:
    name = candidate_name(message.file) if message.file else ""
    return message if name == message.file else message.model_copy(update={"file": name})


def parse_build_log(log: str) -> list[CompilerMessage]:
    """Every diagnostic of the log in order: compiler lines (file:line:col), linker, cmake, make, tools."""
    messages: list[CompilerMessage] = []
    lines = log.splitlines()
    index = 0
    while index < len(lines):
        raw = lines[index]
        index += 1
        if GCC_LINE.match(raw):
            messages.extend(_renamed(m) for m in parse_compiler_output(raw))
            continue
        if match := LLD_LINE.match(raw):
            detail = match["message"].strip()
            while index < len(lines) and lines[index].startswith(">>> "):  # lld's "referenced by" lines
                detail += f" ({lines[index][4:].strip()})" if "referenced by" in lines[index] else ""
                index += 1
            messages.append(CompilerMessage(file="", line=0, column=0, severity="error", message=detail))
            continue
        if match := CMAKE_AT.match(raw):
            body = []
            while index < len(lines) and (lines[index].startswith("  ") or not lines[index].strip()):
                if lines[index].strip():
                    body.append(lines[index].strip())
                elif body:
                    break
                index += 1
            what = f"{match['command']}: " if match["command"] else ""
            messages.append(CompilerMessage(file=candidate_name(match["file"]), line=int(match["line"]), column=0,
                                            severity=match["severity"].lower(),
                                            message=f"cmake {what}{' '.join(body)}".strip()))
            continue
        if match := CMAKE_PLAIN.match(raw):
            messages.append(CompilerMessage(file="", line=0, column=0, severity="error",
                                            message=f"cmake: {match['message'].strip()}"))
            continue
        if (match := MAKE_FAILED.match(raw)) or (match := TOOL_ERROR.match(raw)):
            messages.append(CompilerMessage(file="", line=0, column=0, severity="error",
                                            message=match["message"].strip()))
            continue
        if not raw.startswith(("ld.lld", "lld")):
            for message in parse_compiler_output(raw):  # gcc's linker lines (the glue's link on the host)
                messages.append(_renamed(message))
    return messages

