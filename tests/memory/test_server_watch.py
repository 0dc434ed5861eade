"""The watcher that stops an embedded server signals only that server, never a process that reused its pid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
from psycopg.conninfo import conninfo_to_dict

from kernelsage.memory_backend.server_watch import is_postmaster_of, stop_server


def test_a_stale_pid_file_naming_another_process_signals_nothing(tmp_path: Path) -> None:
    # a server killed with SIGKILL leaves postmaster.pid behind; its pid may since belong to anything
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "postmaster.pid").write_text(f"{bystander.pid}\n{tmp_path}\n")
        stop_server(tmp_path)
        assert bystander.poll() is None, "the watcher signalled a process that is not the server"
    finally:
        bystander.kill()
        bystander.wait()


def test_the_session_server_is_recognised_by_its_data_directory(database_url: str) -> None:
    # this session's server, not another on the machine (the other test process's, a `memory serve`): the
    # embedded server's socket lives in its data directory
    session_data = Path(conninfo_to_dict(database_url)["host"]).resolve()
    servers = [p for p in psutil.process_iter(["name", "cmdline"])
               if p.info["name"] == "postgres" and "-D" in (cmdline := p.info["cmdline"] or [])
               and Path(cmdline[cmdline.index("-D") + 1]).resolve() == session_data]
    assert servers, "the session's embedded server is not running"
    cmdline = servers[0].info["cmdline"]
    pgdata = Path(cmdline[cmdline.index("-D") + 1])
    assert is_postmaster_of(cmdline, pgdata)
    assert not is_postmaster_of(cmdline, pgdata.parent / "elsewhere")
    assert not is_postmaster_of(["python", "-D", str(pgdata)], pgdata)
