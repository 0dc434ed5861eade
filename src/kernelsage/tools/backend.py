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

    `compile` is given the task the candidate is for whenever the caller has it (a backend may build a task's
    candidate with files the task brings, as the ascend backend does for NPUKernelBench); one that needs no
    task accepts and ignores it.

    Optional: `contract_package`, the package whose `prompt_contract.md` and `*.h` tell the model the ABI
    (default `kernelsage.tools.<name>`; see kernelsage.graph.nodes.contract); `candidate_files_for(task)`, the
    files a candidate for that task consists of (default `candidate_files`); `given_files_for(task)`, the
    files the task gives the model, name -> text: the fixed ones its candidate is built with, and the starting
    point of each file the model writes (default none). Read them through `files_to_write` and
    `given_files`."""

    name: str
    candidate_files: tuple[str, ...]  # the source files a candidate for this backend consists of

    def compile(self, candidate: Candidate, *, task: Task | None = None) -> CompileResult: ...

    def verify(self, artifact: Artifact, task: Task) -> VerifyResult: ...

    def profile(self, artifact: Artifact, task: Task) -> ProfileResult: ...

    def close(self) -> None: ...


def files_to_write(backend: KernelBackend, task: Task) -> tuple[str, ...]:
    """The files the model writes for `task`: the backend's `candidate_files_for(task)`, else its
    `candidate_files`."""
    for_task = getattr(backend, "candidate_files_for", None)
    return tuple(for_task(task)) if for_task is not None else tuple(backend.candidate_files)


def given_files(backend: KernelBackend, task: Task) -> dict[str, str]:
    """The files `task` gives the model on this backend (`given_files_for(task)`; none by default)."""
    for_task = getattr(backend, "given_files_for", None)
    return dict(for_task(task)) if for_task is not None else {}


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
