"""The kernel's contract in every writing prompt, whatever the memory shows: the backend's ABI header
(its contract comment, types, entry point and helper signatures) and every test case's tensors.

The contract comes from the backend's package (`kernelsage.tools.<backend>`, or the package a user's backend
names in its `contract_package` attribute), read as data files so the graph does not import the backend's
code: its `prompt_contract.md` (the files a candidate consists of, their roles, how they are built; the part
after a `<!-- details -->` line is left out of compact prompts), then the essentials of each ABI header
(`*.h`). A backend with neither contributes no text. The files to write are the task's on its backend (a task
may bring its own host side: NPUKernelBench's kernel-only mode), shown with the files the task gives.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from importlib import resources
from importlib.abc import Traversable
from typing import Any

from kernelsage.graph.nodes.bounds import MAX_CODE_CHARS, bound
from kernelsage.tasks.interface import describe_interface
from kernelsage.tasks.model import Task, TestCase
from kernelsage.tools.backend import KernelBackend, files_to_write, given_files

CONTRACT_FILE = "prompt_contract.md"
DETAILS_MARK = "<!-- details -->"
MAX_CASES_SHOWN = 12  # a suite with many cases shows the first ones and counts the rest
COMPACT_CASES_SHOWN = 3  # in a prompt shrunk to fit the model's window
_interfaces: dict[tuple[str, int, bool], str] = {}
_lock = threading.Lock()


RULES_HEADING = "Contract"  # the line of a header's leading comment where its rules start


def contract_package(backend: str | Any) -> str:
    """The package holding the contract of `backend` (a backend or a built-in backend's name)."""
    if isinstance(backend, str):
        return f"kernelsage.tools.{backend}"
    return getattr(backend, "contract_package", None) or f"kernelsage.tools.{backend.name}"


def kernel_contract(backend: str | Any, compact: bool = False) -> str:
    """The essentials of the backend's ABI header as a fenced C block; `compact` keeps only the rules of the
    header's leading comment (a prompt shrunk to fit the model's window keeps the rules and declarations).
    `backend` is a backend (its `contract_package` is honoured) or a built-in backend's name."""
    return _contract(contract_package(backend), backend if isinstance(backend, str) else backend.name, compact)


@cache
def _contract(package_name: str, name: str, compact: bool) -> str:
    try:
        package = resources.files(package_name)
    except ModuleNotFoundError:
        package = None
    headers = sorted((e for e in package.iterdir() if e.name.endswith(".h")), key=lambda e: e.name) if package else []
    parts = [written_contract(package, compact)] if package and package.joinpath(CONTRACT_FILE).is_file() else []
    for header in headers:
        text = header_essentials(header.read_text(encoding="utf-8"))
        if compact and text.startswith("/*"):
            text = compact_comment(text)
        parts.append(f"```c\n// {header.name}: #include it\n{text}\n```")
    return "\n\n".join(parts) or f"(the {name} backend documents no ABI header: follow the interface below)"


def candidate_files_text(backend: KernelBackend, task: Task) -> str:
    """The files the model writes for `task` on `backend`, then each file the task gives: fixed (built as
    shown) or the starting point of a file to write."""
    names = files_to_write(backend, task)
    parts = [", ".join(names)]
    for name, text in given_files(backend, task).items():
        role = "your starting point for this file" if name in names else "fixed: built as shown, do not write it"
        shown = bound(text.rstrip(), MAX_CODE_CHARS)
        parts.append(f"\nGiven by the task: {name} ({role})\n```cpp\n{shown}\n```")
    return "\n".join(parts)


def compact_comment(text: str) -> str:
    """`text` (a header's essentials) with its leading comment cut to the rules: from the line that reads
    RULES_HEADING to the comment's end. The rules (every output element written, return 0) are what a kernel
    fails without; the prose before them repeats the declarations. No rules heading: no comment."""
    end = text.find("*/") + 2
    comment, rest = text[:end], text[end:].strip()
    lines = comment.split("\n")
    start = next((n for n, line in enumerate(lines) if line.strip(" *") == RULES_HEADING), None)
    if start is None:
        return rest
    return "/*\n" + "\n".join(lines[start:]) + "\n" + rest


def written_contract(package: Traversable, compact: bool) -> str:
    """The backend's own contract text; `compact` keeps what precedes the details mark."""
    text = package.joinpath(CONTRACT_FILE).read_text(encoding="utf-8")
    if compact:
        text = text.split(DETAILS_MARK, 1)[0]
    return text.replace(DETAILS_MARK, "").strip()


def header_essentials(source: str) -> str:
    """The header without its guards and function bodies: the leading comment, the defines and types,
    the entry point's prototype and each helper's signature (with the comment just above it)."""
    kept: list[str] = []
    lines = source.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if stripped.startswith(("#ifndef", "#endif", "#ifdef", "#include", 'extern "C"')) or stripped in ("}", "{"):
            index += 1
            continue
        if stripped.startswith("#define") and stripped.split()[1:2] and stripped.split()[1].endswith("_H"):
            index += 1
            continue
        if stripped.startswith("static inline"):
            signature = [stripped]
            while "{" not in signature[-1] and index + 1 < len(lines):
                index += 1
                signature.append(lines[index].strip())
            kept.append(" ".join(signature).split("{")[0].rstrip() + ";")
            index = _skip_body(lines, index)
            continue
        kept.append(line)
        index += 1
    text = "\n".join(kept)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip()


def _skip_body(lines: list[str], index: int) -> int:
    """The index after the function body that opens on lines[index] (braces counted)."""
    depth = 0
    while index < len(lines):
        depth += lines[index].count("{") - lines[index].count("}")
        index += 1
        if depth <= 0:
            return index
    return index


def task_interface(task: Task, compact: bool = False) -> str:
    """The C ABI view of every test case (computed once per task): the kernel must handle them all.
    `compact` shows fewer cases (still every dtype in the header line)."""
    key = (task.id, id(task), compact)
    with _lock:
        known = _interfaces.get(key)
    if known is not None:
        return known
    shown = cases_shown(task.cases, COMPACT_CASES_SHOWN if compact else MAX_CASES_SHOWN)
    parts = [describe_interface(task, case) for case in shown]
    left = len(task.cases) - len(shown)
    if left > 0:
        parts.append(f"... and {left} more case(s) of the same form (other shapes; every dtype is shown above)")
    dtypes = sorted({case.dtype for case in task.cases})
    branch = "Branch on each tensor's dtype; read" if len(dtypes) > 1 else "Read"
    header = (f"{len(task.cases)} test case(s), dtypes {', '.join(dtypes)}; the timing uses a larger "
              f"performance case of the same form. {branch} shapes at run time.")
    text = header + "\n" + "\n".join(parts)
    with _lock:
        _interfaces[key] = text
    return text


def cases_shown(cases: Sequence[TestCase], limit: int) -> list[TestCase]:
    """The cases a prompt shows, in their order: the first of every dtype (a kernel must branch on each,
    whatever the limit), then the earliest others up to `limit`."""
    firsts: dict[str, int] = {}
    for index, case in enumerate(cases):
        firsts.setdefault(case.dtype, index)
    chosen = set(firsts.values())
    for index in range(len(cases)):
        if len(chosen) >= limit:
            break
        chosen.add(index)
    return [case for index, case in enumerate(cases) if index in chosen]
