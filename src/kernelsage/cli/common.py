"""What every command shares: error reporting, JSON output, the store."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelsage.errors import ConfigurationError, KernelsageError
from kernelsage.memory_backend.params import DEFAULT_NAMESPACE

console = Console()  # results: tables and summaries (stdout)
err_console = Console(stderr=True)  # progress, narrative under --json, errors (stderr)

NamespaceOption = typer.Option(
    os.environ.get("KERNELSAGE_NAMESPACE", DEFAULT_NAMESPACE), "--namespace", "-n",
    help="Memory namespace (e.g. hardware/language/project). Env: KERNELSAGE_NAMESPACE.",
)
JsonOption = typer.Option(False, "--json", help="Print one JSON document on stdout (progress and logs go to "
                                                   "stderr).")
DatabaseOption = typer.Option(
    None, "--db", help="The memory database: a postgresql:// URL or the directory of an embedded one (e.g. "
                       "runs/demo/db, where `kernelsage demo` keeps its memory). Default: DATABASE_URL, else the "
                       "per-user embedded server.",
)


# Exit codes (README "Exit codes"): a script tells a result that failed from a command that could not run.
EXIT_FAILED = 1  # the command ran to its end, but what it judged failed (a wrong kernel, a model that failed)
EXIT_REFUSED = 2  # the command could not run or go on: bad arguments or input, configuration, database, endpoint
EXIT_INTERRUPTED = 130  # Ctrl-C, the shell's code for a command ended by SIGINT


def run_guarded(app: typer.Typer) -> None:
    """Run a typer app; a KernelsageError becomes one red line on stderr and exit code 2."""
    try:
        app()  # standalone: usage errors print click's message and exit 2
    except KernelsageError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(EXIT_REFUSED)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def print_json(payload: Any) -> None:
    """One JSON document on stdout, on one line: the only thing a command prints there under --json."""
    sys.stdout.write(json.dumps(payload, default=_default, sort_keys=True) + "\n")
    sys.stdout.flush()


def say(text: str, *, to: Console | None = None) -> None:
    """A plain line (no markup): never re-wrapped, so paths and commands stay whole when piped."""
    (to or console).print(text, markup=False, highlight=False, soft_wrap=True)


def new_table(title: str | None = None, *, show_header: bool = True) -> Table:
    """A table without vertical rules (narrow enough for 80 columns); callers add columns, keeping
    identifiers on one line (`no_wrap`) and letting prose wrap between words."""
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_header=show_header,
                 pad_edge=False, collapse_padding=True)


def store_url(db: str | None) -> str | None:
    """The URL `--db` names: a postgresql:// URL as given, or the embedded server of a data directory
    (which must hold a database already); None for the default (DATABASE_URL or the per-user server)."""
    if not db:
        return None
    from kernelsage.memory_backend.database import check_url
    from kernelsage.memory_backend.embedded import embedded_database_url

    if "://" in db:
        check_url(db, "--db")
        return db
    directory = Path(db)
    if not (directory / "PG_VERSION").is_file():
        raise ConfigurationError(f"--db {db}: no memory database there (a directory such as runs/demo/db, "
                                 "written by `kernelsage demo`, or a postgresql:// URL)")
    return embedded_database_url(directory)


@contextmanager
def open_store(db: str | None = None) -> Iterator[Any]:
    """The memory store `--db` names, else the one at DATABASE_URL, else the per-user embedded server."""
    from kernelsage.memory_backend.store import MemoryStore

    store = MemoryStore.connect(store_url(db))
    try:
        yield store
    finally:
        store.close()
