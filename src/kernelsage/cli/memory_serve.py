"""`kernelsage memory serve`: the memory of a multi-host Ray cluster, served from this host (docs/scale.md)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kernelsage.cli.common import err_console, say
from kernelsage.cli.interrupt import interruptible
from kernelsage.cli.invocation import program
from kernelsage.errors import ConfigurationError

if TYPE_CHECKING:
    from kernelsage.memory_backend.served import ServedDatabase

DEFAULT_PORT = 5432  # PostgreSQL's own
STOP_GRACE_S = 30.0  # the server's fast shutdown may take a few seconds on a busy host


def serve(
    listen: str | None = typer.Option(
        None, "--listen", metavar="ADDRESS",
        help="The IP address of this host to listen on, the one the other nodes reach (127.0.0.1: this host only)."),
    port: int = typer.Option(DEFAULT_PORT, "--port", min=1, max=65535, help="The TCP port to listen on."),
    data: Path | None = typer.Option(
        None, "--data", metavar="DIR", help="Where the served database lives (default: `served` next to the "
                                            "embedded server's data, under KERNELSAGE_HOME or the user data dir)."),
    allow_any_address: bool = typer.Option(
        False, "--allow-any-address", help="Allow --listen 0.0.0.0 or :: (every address of this host)."),
    print_url: bool = typer.Option(
        False, "--print-url", help="Print the URL of the database served from --data now, start nothing."),
) -> None:
    """Serve the memory to every node of a cluster: PostgreSQL + pgvector with TLS and a password, on one
    address. Prints the DATABASE_URL line to export on every node, then serves until Ctrl-C."""
    from kernelsage.memory_backend import served

    paths = served.served_paths(data)
    if print_url:
        say(served.running_url(paths))
        return
    if listen is None:
        raise ConfigurationError("--listen ADDRESS is required: the IP address of this host that the other nodes "
                                 "reach (127.0.0.1 for this host only)")
    address = served.listen_address(listen, allow_any=allow_any_address)
    stopped = f"stopped serving {paths.home}: its data stays; `{program()} memory serve` serves it again"
    with interruptible(lambda: stopped, grace_s=STOP_GRACE_S):
        database = served.serve(paths, address, port)  # inside: Ctrl-C while it starts stops it cleanly too
        try:
            say(f"DATABASE_URL={database.url}")
            sys.stdout.flush()  # at once: a script reads the line while the server runs
            _narrate(database, address, port)
            threading.Event().wait()  # until Ctrl-C or SIGTERM
        finally:
            database.close()


def _narrate(database: ServedDatabase, address: str, port: int) -> None:
    certificate = database.paths.certificate
    made = " (made now: copy it to nodes that check it)" if database.new_certificate else ""
    say(f"serving the memory in {database.paths.home} on {address} port {port}, TLS and a password; export the "
        f"line above on every node. The certificate is {certificate}{made}: with a copy on a node, add "
        f"&sslrootcert=PATH and use sslmode=verify-full to check the server too. Ctrl-C stops it.", to=err_console)
