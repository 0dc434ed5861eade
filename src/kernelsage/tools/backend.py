"""The hardware-neutral backend protocol and the registry the cpu (and later ascend, cuda) backends plug into."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from kernelsage.errors import BackendError
from kernelsage.tasks.model import Task
from kernelsage.tools.results import Artifact, Candidate, CompileResult, ProfileResult, VerifyResult


@runtime_checkable
class KernelBackend(Protocol):
    """Candidate in, result out: a backend knows nothing of memory or graphs.

    Optional: `contract_package`, the package whose `prompt_contract.md` and `*.h` tell the model the ABI
    (default `kernelsage.tools.<name>`; see kernelsage.graph.nodes.contract)."""

    name: str
    candidate_files: tuple[str, ...]  # the source files a candidate for this backend consists of

    def compile(self, candidate: Candidate) -> CompileResult: ...

    def verify(self, artifact: Artifact, task: Task) -> VerifyResult: ...

    def profile(self, artifact: Artifact, task: Task) -> ProfileResult: ...

    def close(self) -> None: ...


_FACTORIES: dict[str, Callable[..., KernelBackend]] = {}


def register_backend(name: str, factory: Callable[..., KernelBackend]) -> None:
    """Make a backend available to `get_backend(name)`."""
    _FACTORIES[name] = factory


def backend_names() -> list[str]:
    _register_builtin()
    return sorted(_FACTORIES)


def get_backend(name: str = "cpu", **options: object) -> KernelBackend:
    """A new backend instance by name (options go to its constructor)."""
    _register_builtin()
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise BackendError(f"unknown backend {name!r}; available: {', '.join(sorted(_FACTORIES))}") from None
    return factory(**options)


def _register_builtin() -> None:
    if "cpu" not in _FACTORIES:
        from kernelsage.tools.cpu.backend import CpuBackend

        register_backend("cpu", CpuBackend)
    if "ascend" not in _FACTORIES:
        register_backend("ascend", _ascend_backend)
    if "triton" not in _FACTORIES:
        register_backend("triton", _triton_backend)


def _ascend_backend(**options: object) -> KernelBackend:
    # Imported when asked for: the ascend backend checks CANN and the NPUs when it is built (never torch_npu).
    from kernelsage.tools.ascend.backend import AscendBackend

    return AscendBackend(**options)  # type: ignore[arg-type]


def _triton_backend(**options: object) -> KernelBackend:
    # Imported when asked for: the triton backend checks its device (and triton's presence) when it is built.
    from kernelsage.tools.triton.backend import TritonBackend

    return TritonBackend(**options)  # type: ignore[arg-type]
