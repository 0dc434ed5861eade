"""Checks of a stream command's arguments that need nothing loaded: they run before torch, the suite, the
embedding model or the database, so a typo is refused in about a second rather than after a minute of loading
on a busy machine. Each raises `ConfigurationError` with one line naming the argument and what to do."""

from __future__ import annotations

import os
from pathlib import Path

from kernelsage.errors import ConfigurationError

_ORDER_NAMES = ("curriculum", "mixed")


def check_policies(policies: list[str]) -> None:
    """Every policy is one `kernelsage` knows."""
    from kernelsage.memory_backend.policies import POLICIES

    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ConfigurationError(f"unknown memory policies {unknown}; choose from {', '.join(POLICIES)}")


def check_model_spec(spec: str) -> None:
    """`provider:model` or `replay:<file>` in form (building the model, which loads the provider's client
    library, checks the rest: the provider, the key, the recording)."""
    provider, _, model = spec.partition(":")
    if not provider.strip() or not model.strip():
        raise ConfigurationError(f"model {spec!r} is not 'provider:model': write e.g. 'openai:gpt-4o-mini'")


def check_suite(suite: str) -> None:
    """'builtin', or a path that exists (the loader says the same, but only once torch is loaded)."""
    if suite != "builtin" and not Path(suite).expanduser().exists():
        raise ConfigurationError(f"--suite {suite}: no such file or directory (give a suite path or 'builtin')")


def check_order(order: str) -> None:
    """The order's form: a name, `level:N` with a number, or `file:PATH` naming a file. Whether the suite has
    that level or those ids is known only once it is loaded."""
    if order in _ORDER_NAMES:
        return
    if order.startswith("level:"):
        if not order.removeprefix("level:").strip().isdigit():
            raise ConfigurationError(f"order {order!r}: the level must be a number, e.g. level:3")
        return
    if order.startswith("file:"):
        if not Path(order.removeprefix("file:")).is_file():
            raise ConfigurationError(f"order file {order.removeprefix('file:')} does not exist")
        return
    raise ConfigurationError(f"unknown order {order!r}; use one of curriculum, mixed, level:N, file:PATH")


def check_frozen_memory(frozen_memory: Path | None) -> None:
    if frozen_memory is not None and not frozen_memory.is_file():
        raise ConfigurationError(f"--frozen-memory {frozen_memory}: no such file (an export written by "
                                 "`kernelsage memory export`)")


def check_writable(run_dir: Path) -> None:
    """The run directory can be written: it, or the nearest folder above it that exists, is a writable
    directory. Nothing is created here, so an interrupted start leaves no empty run directory behind."""
    existing = run_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    fix = "give a writable --run-dir"
    if not existing.is_dir():
        raise ConfigurationError(f"run directory {run_dir}: {existing} is a file, not a directory; {fix}")
    # access() honours read-only file systems even for root; plain permissions only for other users.
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigurationError(f"run directory {run_dir}: {existing} is not writable; {fix}")
