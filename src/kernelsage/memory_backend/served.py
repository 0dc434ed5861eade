"""The embedded server opened for a cluster (`kernelsage memory serve`): password, TLS, one address.

pgserver's PostgreSQL has no TLS of its own (built without OpenSSL), so the server listens on its Unix socket
only and a TLS front (tls_front.py) in the serving process is the one network listener, on the address the
user named. The server's pg_hba.conf has a single line, SCRAM passwords on that socket: the front adds TLS,
the server checks the password. The served directory keeps, next to the cluster (`pgdata/`), the password
the nodes use (`password`), the administrator's (`admin-password`, never printed), the certificate (`tls/`)
and, while it runs, where it listens (`served.json`).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import signal
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from kernelsage.errors import ConfigurationError, DatabaseError
from kernelsage.memory_backend.embedded import check_vectors, default_data_dir, prepare_data_dir, start_server
from kernelsage.memory_backend.served_secrets import ensure_certificate, kept, secret
from kernelsage.memory_backend.tls_front import TlsFront, listening_socket, server_context

SERVED_USER = "kernelsage"  # the nodes' role: owns the memory's database, no superuser rights
SERVED_DATABASE = "kernelsage"
ADMIN_USER = "postgres"  # pgserver's superuser, used by this process only
HBA_RELOAD_WAIT_S = 5.0
STOP_WAIT_S = 60.0
NO_TLS_REFUSAL = "this memory server takes TLS connections only: connect with sslmode=require"


@dataclass(frozen=True)
class ServedPaths:
    """Where a served database keeps its parts, under one directory."""

    home: Path

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def password(self) -> Path:
        return self.home / "password"

    @property
    def admin_password(self) -> Path:
        return self.home / "admin-password"

    @property
    def certificate(self) -> Path:
        return self.home / "tls" / "server.crt"

    @property
    def key(self) -> Path:
        return self.home / "tls" / "server.key"

    @property
    def state(self) -> Path:
        return self.home / "served.json"


def default_served_dir() -> Path:
    """`served`, next to the embedded server's data directory (under KERNELSAGE_HOME or the user's data dir)."""
    return default_data_dir().parent / "served"


def served_paths(data: Path | None) -> ServedPaths:
    """The served directory `--data` names (default: default_served_dir), refused where it would share the
    embedded server's cluster, which other commands may have open."""
    home = (data or default_served_dir()).expanduser().resolve()
    paths = ServedPaths(home)
    embedded = default_data_dir().expanduser().resolve()
    if paths.pgdata == embedded or embedded in paths.pgdata.parents or paths.pgdata in embedded.parents:
        raise ConfigurationError(f"--data {home} would share the embedded server's data directory {embedded}: "
                                 f"name another directory (default: {default_served_dir()})")
    if (home / "PG_VERSION").exists():
        raise ConfigurationError(f"--data {home} is a PostgreSQL data directory itself: name a directory for the "
                                 "served database (it keeps its cluster in pgdata/ there)")
    return paths


def listen_address(text: str, *, allow_any: bool = False) -> str:
    """The IP address to listen on, checked: one address of this host, not every address unless allowed."""
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        raise ConfigurationError(f"--listen {text!r} is not an IP address: name the address of this host that "
                                 "the other nodes reach (e.g. 10.0.0.5), or 127.0.0.1 for this host only") from None
    if address.is_unspecified and not allow_any:
        raise ConfigurationError(f"--listen {text} would open the memory on every address of this host: name the "
                                 "one the nodes reach, or add --allow-any-address if that is what you want")
    return str(address)


def served_url(password: str, address: str, port: int, *, sslmode: str = "require") -> str:
    """The connection URL the nodes use: the served role and database, over TLS."""
    host = f"[{address}]" if ":" in address else address
    return (f"postgresql://{SERVED_USER}:{quote(password, safe='')}@{host}:{port}/{SERVED_DATABASE}"
            f"?sslmode={sslmode}")


def hba_text() -> str:
    """pg_hba.conf of the served server: SCRAM passwords on its Unix socket, which is all it listens on (the
    TLS front is its only way in from the network); no trust, no TCP line."""
    return ("# written by `kernelsage memory serve`, again at each start: the server listens on its Unix\n"
            "# socket only; the network reaches it through the TLS front, and every role needs its password.\n"
            "local   all   all   scram-sha-256\n")


@dataclass
class ServedDatabase:
    """A running served database: its URL, its certificate, and `close()` to stop it."""

    paths: ServedPaths
    url: str
    new_certificate: bool
    front: TlsFront
    lock: IO[str]  # held while this process serves the directory

    def close(self) -> None:
        """Stop the front, then the server (fast: open sessions are ended); the data stays."""
        self.front.close()
        self.paths.state.unlink(missing_ok=True)
        stop_server(self.paths.pgdata)
        self.lock.close()


def serve(paths: ServedPaths, address: str, port: int) -> ServedDatabase:
    """Start the served database in `paths` on `address`:`port` and return it; a clear error when another
    process serves it already, the port is taken, or the server cannot start."""
    prepare_data_dir(paths.home)
    lock = _serving_lock(paths)
    try:
        password, admin = secret(paths.password), secret(paths.admin_password)
        new_certificate = ensure_certificate(paths.certificate, paths.key, address)
        listener = listening_socket(address, port)  # before the server starts: a taken port fails fast
    except BaseException:
        lock.close()
        raise
    try:
        with warnings.catch_warnings():  # pgserver warns when XDG_RUNTIME_DIR is unset; harmless
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            server = start_server(paths.pgdata)
        _without_exit_handler(server)
        _set_up(server, paths.pgdata, password=password, admin=admin)
        postmaster = server.get_postmaster_info()
        upstream = Path(postmaster.socket_dir) / f".s.PGSQL.{postmaster.port}"
        front = TlsFront(listener, upstream, server_context(paths.certificate, paths.key), NO_TLS_REFUSAL).start()
    except BaseException:  # Ctrl-C while it starts included: no server is left behind
        listener.close()
        stop_server(paths.pgdata)
        lock.close()
        raise
    _write_state(paths, address, port)
    return ServedDatabase(paths, served_url(password, address, port), new_certificate, front, lock)


def _serving_lock(paths: ServedPaths) -> IO[str]:
    """The served directory's lock, held while this process serves it: a second `serve` of the same directory,
    started at the same instant or later, is refused in one line instead of racing for its password files."""
    lock = (paths.home / "serving.lock").open("a", encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        running = running_state(paths)
        where = f" on {running['address']} port {running['port']} (process {running['pid']})" if running else ""
        raise DatabaseError(f"{paths.home} is served already{where}: `kernelsage memory serve --print-url --data "
                            f"{paths.home}` prints its URL") from None
    return lock


def _without_exit_handler(server: Any) -> None:
    """This process stops the server itself (ServedDatabase.close); pgserver's exit handler would wait for
    its user-wide lock first (see embedded._track_clients)."""
    import atexit

    atexit.unregister(server._cleanup)


def _set_up(server: Any, pgdata: Path, *, password: str, admin: str) -> None:
    """Passwords, the nodes' role and database with pgvector, then pg_hba.conf: again at each start, so a
    password file changed since is taken. The administrator logs in without a password only on the first
    start (pgserver makes the cluster with trust), before pg_hba.conf is written."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    socket_url = str(server.get_uri())
    try:
        with psycopg.connect(socket_url, password=admin, autocommit=True) as conn:
            for role, value in ((ADMIN_USER, admin), (SERVED_USER, password)):
                hashed = conn.pgconn.encrypt_password(value.encode(), role.encode(), b"scram-sha-256").decode()
                exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
                statement = "ALTER ROLE {} WITH LOGIN PASSWORD {}" if exists else "CREATE ROLE {} LOGIN PASSWORD {}"
                conn.execute(sql.SQL(statement).format(sql.Identifier(role), sql.Literal(hashed)))
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (SERVED_DATABASE,)).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(SERVED_DATABASE), sql.Identifier(SERVED_USER)))
            (pgdata / "pg_hba.conf").write_text(hba_text(), encoding="utf-8")
            conn.execute("SELECT pg_reload_conf()")
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"cannot log in to the served server in {pgdata} as its administrator "
                            f"({' '.join(str(exc).split())[:200]}): the admin-password file next to it was changed; "
                            "restore it, or serve a new --data directory") from None
    # pgvector needs a superuser to be created; the nodes' role then finds it there
    admin_url = make_conninfo(socket_url, password=admin, dbname=SERVED_DATABASE)
    check_vectors(admin_url, pgdata)
    _wait_for_passwords(socket_url)


def _wait_for_passwords(socket_url: str) -> None:
    """Return once the server asks for passwords (a reload takes effect a moment after it is asked for)."""
    import psycopg

    deadline = time.monotonic() + HBA_RELOAD_WAIT_S
    while time.monotonic() < deadline:
        try:
            psycopg.connect(socket_url, password="", connect_timeout=2).close()
        except psycopg.OperationalError:
            return
        time.sleep(0.05)
    raise DatabaseError("the served server still lets its administrator in without a password after its "
                        "pg_hba.conf was written: not opening it to the network")


def stop_server(pgdata: Path, wait_s: float = STOP_WAIT_S) -> None:
    """Stop the server of `pgdata` as `pg_ctl stop -m fast` does (SIGINT to its postmaster: open sessions end)
    and wait for it; nothing to do when none runs (Ctrl-C in a terminal may have reached it first)."""
    import psutil

    try:
        pid = int((pgdata / "postmaster.pid").read_text(encoding="utf-8").split()[0])
        postmaster = psutil.Process(pid)
        if postmaster.name() != "postgres" or str(pgdata) not in postmaster.cmdline():
            return  # a stale pid file, its number now another process's
        postmaster.send_signal(signal.SIGINT)
        postmaster.wait(wait_s)
    except (OSError, ValueError, IndexError, psutil.Error):
        return


def _write_state(paths: ServedPaths, address: str, port: int) -> None:
    import psutil

    me = psutil.Process()
    state = {"pid": me.pid, "started": me.create_time(), "address": address, "port": port}
    paths.state.write_text(json.dumps(state) + "\n", encoding="utf-8")


def running_state(paths: ServedPaths) -> dict[str, Any] | None:
    """Where the served database of `paths` listens, when the process that serves it is alive."""
    import psutil

    try:
        state = json.loads(paths.state.read_text(encoding="utf-8"))
        alive = psutil.Process(state["pid"]).create_time() == state["started"]
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return None
    return state if alive else None


def running_url(paths: ServedPaths) -> str:
    """The URL of the database served from `paths` now; a DatabaseError when none is."""
    state = running_state(paths)
    password = kept(paths.password)
    if state is None or not password:
        raise DatabaseError(f"no database is served from {paths.home} now: start it with "
                            f"`kernelsage memory serve --listen ADDRESS --data {paths.home}`")
    return served_url(password, state["address"], state["port"])
