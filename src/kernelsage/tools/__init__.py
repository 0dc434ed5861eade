"""Kernel tools: the backend protocol and backends, the sandbox, correctness, timing and safeguards.

The public names below are imported on first use (PEP 562), so a light module (`kernelsage.tools.results`,
which episode records use) loads without the backends, the tasks or torch.
"""

from __future__ import annotations

from kernelsage.lazy_exports import lazy_exports

_WHERE = {
    "KernelBackend": "backend", "backend_names": "backend", "get_backend": "backend",
    "register_backend": "backend",
    **{name: "results" for name in ("Artifact", "Candidate", "CaseResult", "CompileResult", "CompilerMessage",
                                     "Mismatch", "ProfileResult", "Status", "Timing", "VerifyResult")},
}
__all__ = [  # the keys of _WHERE, spelt out for linters and type checkers
    "Artifact", "Candidate", "CaseResult", "CompileResult", "CompilerMessage", "KernelBackend", "Mismatch",
    "ProfileResult", "Status", "Timing", "VerifyResult", "backend_names", "get_backend", "register_backend",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
