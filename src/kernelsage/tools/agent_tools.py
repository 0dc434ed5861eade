"""LangChain tools over a kernel backend, bound to one task, for nodes that let the model call tools.

Each tool returns a short JSON text for the model; the full records stay in a `KernelSession` the caller
can read (and keep in graph state).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend, files_to_write
from kernelsage.tools.diagnostics import describe_mismatches, summarize_compiler_errors
from kernelsage.tools.results import Candidate, CompileResult, ProfileResult, VerifyResult


@dataclass
class KernelSession:
    """The latest results of the tools, for the graph (the model sees only their summaries)."""

    compiled: CompileResult | None = None
    verified: VerifyResult | None = None
    profiled: ProfileResult | None = None


def _text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True)


def make_kernel_tools(backend: KernelBackend, task: Task, session: KernelSession | None = None) -> list[BaseTool]:
    """compile_kernel, verify_kernel, profile_kernel, show_mismatches and summarize_compiler_errors for `task`."""
    state = session if session is not None else KernelSession()
    main_file = files_to_write(backend, task)[0]

    # the default is the backend's first file for this task (its tool schema shows it: kernel.cpp on cpu,
    # op_kernel/<op>.cpp for a kernel-only Ascend task); recordings of runs replay against this schema
    def compile_kernel(source: str, file_name: str = main_file) -> str:
        candidate = Candidate(task_id=task.id, files={file_name: source})
        result = backend.compile(candidate, task=task)
        state.compiled, state.verified, state.profiled = result, None, None
        return _text({"ok": result.ok, "status": result.status.value, "seconds": round(result.seconds, 3),
                      "cached": result.cached, "summary": summarize_compiler_errors(result)})

    def verify_kernel() -> str:
        if state.compiled is None or state.compiled.artifact is None:
            return _text({"ok": False, "summary": "nothing to verify: compile a kernel successfully first"})
        result = backend.verify(state.compiled.artifact, task)
        state.verified = result
        return _text({"correct": result.correct, "status": result.status.value, "trials": result.trials,
                      "case_runs": len(result.cases), "summary": describe_mismatches(result, limit=3)})

    def profile_kernel() -> str:
        if state.compiled is None or state.compiled.artifact is None:
            return _text({"ok": False, "summary": "nothing to profile: compile a kernel successfully first"})
        result = backend.profile(state.compiled.artifact, task)
        state.profiled = result
        payload: dict[str, Any] = {"ok": result.ok, "status": result.status.value, "case": result.case,
                                   "output_correct": result.output_correct, "message": result.message}
        if result.candidate and result.reference:
            payload.update(candidate_ms=round(result.candidate.mean * 1e3, 4),
                           reference_ms=round(result.reference.mean * 1e3, 4), speedup=round(result.speedup, 3),
                           candidate_cv=round(result.candidate.cv, 4))
        return _text(payload)

    def show_mismatches(limit: int = 8) -> str:
        if state.verified is None:
            return "no verification yet: call verify_kernel first"
        return describe_mismatches(state.verified, limit=limit)

    def compiler_errors(limit: int = 8) -> str:
        if state.compiled is None:
            return "nothing compiled yet: call compile_kernel first"
        return summarize_compiler_errors(state.compiled, limit=limit)

    interface = f"task {task.id!r} on the {backend.name} backend"
    return [
        StructuredTool.from_function(compile_kernel, name="compile_kernel", description=(
            f"Compile a kernel for {interface}. `source` is the complete source file. Returns ok/status and "
            "the first compiler errors (or why a safeguard rejected it).")),
        StructuredTool.from_function(verify_kernel, name="verify_kernel", description=(
            f"Check the last compiled kernel against the reference of {interface} on every test case with "
            "fresh random inputs. Returns whether it is correct and, if not, the failure class and first "
            "mismatches.")),
        StructuredTool.from_function(profile_kernel, name="profile_kernel", description=(
            f"Time the last compiled kernel and the reference of {interface} on the performance case. "
            "Returns mean latencies in ms and the speedup over the reference.")),
        StructuredTool.from_function(show_mismatches, name="show_mismatches", description=(
            "Show the failing test case of the last verification: error statistics and up to `limit` wrong "
            "elements with their indices, expected and actual values.")),
        StructuredTool.from_function(compiler_errors, name="summarize_compiler_errors", description=(
            "Summarise the errors of the last compilation: file:line:column and message, duplicates removed.")),
    ]
