"""What every backend that runs candidate code shares about isolation: detected once, refused without the
unsafe flag, and a loud warning the first time code runs without it."""

from __future__ import annotations

import dataclasses
import warnings
from typing import TypeVar

from kernelsage.tools.isolation import Isolation, require, unsafe_requested
from kernelsage.tools.sandbox import Limits

_Backend = TypeVar("_Backend", bound="IsolatedBackend")


class UnsafeIsolationWarning(RuntimeWarning):
    """Candidate code runs without isolation because the unsafe flag was given."""


class IsolatedBackend:
    """Mixin for backends: call `_init_isolation` in the constructor, then use `isolation` and `_limits`;
    a context manager that calls the backend's `close` on exit."""

    unsafe_no_isolation: bool
    _isolation: Isolation | None
    _warned: bool

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
