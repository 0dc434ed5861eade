"""What every backend that runs candidate code shares about isolation: detected once, refused without the
unsafe flag, and a loud warning the first time code runs without it."""

from __future__ import annotations

import dataclasses
import secrets
import warnings
from pathlib import Path
from typing import Any, TypeVar

from kernelsage.errors import BackendError
from kernelsage.tasks.model import Task
from kernelsage.tools.isolation import Isolation, require, unsafe_requested
from kernelsage.tools.results import Artifact
from kernelsage.tools.sandbox import ChildOutcome, Limits, Sandbox

_Backend = TypeVar("_Backend", bound="IsolatedBackend")
# A verify or profile job's key, from which every instance is derived by a keyed hash (judge.case_seed): 63 bits,
# so a recorded seed fits a signed 64-bit field (checkpoints, PostgreSQL) and is still far past any search.
JOB_KEY_BITS = 63


def job_key() -> int:
    """A fresh key for one verify or profile job, from the operating system's cryptographic generator."""
    return secrets.randbits(JOB_KEY_BITS)


class UnsafeIsolationWarning(RuntimeWarning):
    """Candidate code runs without isolation because the unsafe flag was given."""


class IsolatedBackend:
    """Mixin for backends: call `_init_isolation` in the constructor, then use `isolation` and `_limits`;
    a context manager that calls the backend's `close` on exit."""

    name: str
    unsafe_no_isolation: bool
    _isolation: Isolation | None
    _warned: bool
    _sandbox: Sandbox

    def _init_isolation(self, unsafe_no_isolation: bool, isolation: Isolation | None) -> None:
        self.unsafe_no_isolation = unsafe_requested(unsafe_no_isolation)
        self._isolation = isolation  # tests may pass one; otherwise detected on first use
        self._warned = False

    @property
    def isolation(self) -> Isolation:
        """The isolation in use; raises IsolationUnavailableError where there is none and no unsafe flag."""
        isolation = self._isolation = require(unsafe=self.unsafe_no_isolation, isolation=self._isolation)
        if not isolation.available and not self._warned:
            self._warned = True
            warnings.warn(f"UNSAFE: kernelsage compiles and runs candidate code WITHOUT ISOLATION "
                          f"({isolation.problem}); it can read your files and environment",
                          UnsafeIsolationWarning, stacklevel=3)
        return isolation

    def close(self) -> None:
        """Release what the backend holds (sandboxes, build workers); the base holds nothing."""

    def __enter__(self: _Backend) -> _Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _limits(self, limits: Limits) -> Limits:
        # The judge needs no network namespace under bubblewrap; without it, it keeps what it can.
        return dataclasses.replace(limits, isolate_network=not self.isolation.available)

    def _job_task(self, artifact: Artifact, task: Task) -> dict[str, Any]:
        """The task as a verify or profile job names it, once the artifact is known to be this backend's,
        present and hashed (the judge checks the hash: what runs is what compile checked), and the task is
        one the sandbox can load from its suite."""
        if artifact.backend != self.name:
            raise BackendError(f"artifact was built by the {artifact.backend!r} backend, not {self.name!r}")
        if not Path(artifact.path).is_file() or not artifact.sha256:
            raise BackendError(f"artifact {artifact.path} is missing or has no recorded hash; compile the "
                               "candidate again")
        if task.origin is None:
            raise BackendError(f"task {task.id!r} was not loaded from a suite; load it with "
                               "kernelsage.tasks.loaders.load_suite so the sandbox can load it too")
        return {"id": task.id, "origin": dataclasses.asdict(task.origin)}

    def _run_job(self, target: str, payload: dict[str, Any], limits: Limits) -> ChildOutcome:
        """One job in a fresh sandbox work directory, discarded afterwards."""
        workdir = self._sandbox.workdir()
        try:
            return self._sandbox.run(target, payload, self._limits(limits), workdir)
        finally:
            self._sandbox.discard(workdir)
