"""Keeps the embedded server's list of client processes true, and stops the server when the last is gone.

pgserver counts the processes using a data directory in `.handle_pids.json` and the last one to exit
normally stops the server. A client killed with SIGKILL never takes its pid off that list, so the server
would never stop. Here dead pids are pruned (by every client when it joins and when it exits) and a small
watcher process, one per data directory, stops the server once no listed client is alive, also when the
last one was killed. Every look at the list holds pgserver's own inter-process lock, so a client that is
joining is either on the list or finds the server stopped and starts it again.

    python -m kernelsage.memory_backend.server_watch PGDATA     # the watcher (started by embedded.py)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

WATCH_INTERVAL_S = 1.0
STOP_WAIT_S = 30.0
_WATCHER_LOCK = ".kernelsage-watch.lock"
_watchers: list[subprocess.Popen[bytes]] = []  # kept so that a running watcher is never reported as leaked


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie, killed but not yet reaped, is not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def prune_clients(server_class: Any, pgdata: Path) -> list[int]:
    """Drop dead processes from the data directory's client list; returns the live ones.
    The caller holds pgserver's lock (`server_class._lock`)."""
    from pgserver.utils import DiskList

    clients = DiskList(pgdata / ".handle_pids.json")
    listed = clients.get()
    live = [pid for pid in listed if alive(pid)]
    if live != listed:
        clients.put(live)
    return live


def _postmaster(pgdata: Path) -> psutil.Process | None:
    """The running postmaster of `pgdata`, or None. The pid file outlives a server that was killed, and its
    pid can by then be another process's (a busy machine reuses pids within minutes): that process is not
    the server unless it is a postgres whose command line names this data directory."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or not is_postmaster_of(process.cmdline(), pgdata):
            return None
    except (OSError, ValueError, IndexError, psutil.Error):
        return None
    return process


def is_postmaster_of(cmdline: list[str], pgdata: Path) -> bool:
    """Whether a command line is a postgres server's run on `pgdata` (`postgres -D PGDATA ...`)."""
    if not cmdline or Path(cmdline[0]).name != "postgres":
        return False
    wanted = os.path.realpath(pgdata)
    return any(os.path.realpath(cmdline[i + 1]) == wanted for i, arg in enumerate(cmdline[:-1]) if arg == "-D")


def stop_server(pgdata: Path) -> None:
    """Fast shutdown of the server of `pgdata` (no client is left to lose anything), waiting for it to exit."""
    process = _postmaster(pgdata)
    if process is None:
        return
    try:
        process.send_signal(signal.SIGINT)
        process.wait(STOP_WAIT_S)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        process.kill()


def watch(pgdata: Path, interval: float = WATCH_INTERVAL_S) -> None:
    """Until the server of `pgdata` stops: every `interval` seconds prune dead clients; when none is left,
    stop the server. Returns at once when another watcher already watches this directory."""
    import fasteners
    from pgserver.postgres_server import PostgresServer

    watcher = fasteners.InterProcessLock(pgdata / _WATCHER_LOCK)
    if not watcher.acquire(blocking=False):
        return
    try:
        while pgdata.is_dir():
            time.sleep(interval)
            with PostgresServer._lock:  # pgserver's lock: joining clients register under it
                if prune_clients(PostgresServer, pgdata):
                    continue
                stop_server(pgdata)
                return
    finally:
        watcher.release()


def start_watcher(pgdata: Path) -> None:
    """Start the watcher of `pgdata` as its own session, detached from this process (it outlives it).
    A second watcher of the same directory exits at once, so a client starts one only when none holds
    the watcher lock."""
    import fasteners

    probe = fasteners.InterProcessLock(pgdata / _WATCHER_LOCK)
    if not probe.acquire(blocking=False):
        return  # a watcher is running
    probe.release()
    _watchers.append(subprocess.Popen(  # our own module, run by this interpreter
        [sys.executable, "-m", "kernelsage.memory_backend.server_watch", str(pgdata)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    ))


if __name__ == "__main__":
    watch(Path(sys.argv[1]))
