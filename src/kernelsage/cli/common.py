"""What every command shares: error reporting, JSON output, the store."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from kernelsage.errors import KernelsageError
from kernelsage.memory_backend.params import DEFAULT_NAMESPACE

console = Console()
err_console = Console(stderr=True)

NamespaceOption = typer.Option(
    os.environ.get("KERNELSAGE_NAMESPACE", DEFAULT_NAMESPACE), "--namespace", "-n",
    help="Memory namespace (e.g. hardware/language/project). Env: KERNELSAGE_NAMESPACE.",
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON.")


def run_guarded(app: typer.Typer) -> None:
    """Run a typer app; a KernelsageError becomes one red line on stderr and exit code 2."""
    try:
        app()  # standalone: usage errors print click's message and exit 2
    except KernelsageError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def print_json(payload: Any) -> None:
    """One JSON document on stdout (the last line, for scripts)."""
    sys.stdout.write(json.dumps(payload, default=_default, sort_keys=True) + "\n")


@contextmanager
def open_store() -> Iterator[Any]:
    """The memory store at DATABASE_URL, or the embedded server in the per-user data directory."""
    from kernelsage.memory_backend.store import MemoryStore

    store = MemoryStore.connect()
    try:
        yield store
    finally:
        store.close()
