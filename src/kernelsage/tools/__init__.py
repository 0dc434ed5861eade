"""Kernel tools: the backend protocol and backends, the sandbox, correctness, timing and safeguards."""

from __future__ import annotations

from kernelsage.tools.backend import KernelBackend, backend_names, get_backend, register_backend
from kernelsage.tools.results import (
    Artifact,
    Candidate,
    CaseResult,
    CompileResult,
    CompilerMessage,
    Mismatch,
    ProfileResult,
    Status,
    Timing,
    VerifyResult,
)

__all__ = [
    "Artifact", "Candidate", "CaseResult", "CompileResult", "CompilerMessage", "KernelBackend", "Mismatch",
    "ProfileResult", "Status", "Timing", "VerifyResult", "backend_names", "get_backend", "register_backend",
]
