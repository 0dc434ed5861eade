"""The embedded server's lifetime with real client processes: it stops when its last client is gone, also
when clients were killed with SIGKILL (their pids must not keep it alive)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pgserver", reason="the embedded server (kernelsage[embedded]) is required")
psutil = pytest.importorskip("psutil")

from kernelsage.memory_backend.embedded import crash_message  # noqa: E402

# A client: joins the embedded server of argv[1], proves it with a query, then waits until stdin closes.
CLIENT = (
    "import sys; from pathlib import Path; import psycopg; "
    "from kernelsage.memory_backend.embedded import embedded_database_url; "
    "conn = psycopg.connect(embedded_database_url(Path(sys.argv[1]))); conn.execute('SELECT 1'); conn.close(); "
    "print('ready', flush=True); sys.stdin.read()"
)
STOP_WITHIN_S = 20


@pytest.fixture
def clients() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:  # never leave a client behind, whatever the test did
        if process.poll() is None:
            process.kill()
            process.wait()


def start_client(pgdata: Path, started: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", CLIENT, str(pgdata)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    started.append(process)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def postmaster(pgdata: Path) -> psutil.Process:
    return psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))


def kill(process: subprocess.Popen[str]) -> None:
    process.kill()  # SIGKILL: no exit handler runs, its pid stays on the server's client list
    process.wait()


def test_server_stops_when_its_last_client_is_gone_even_after_kills(tmp_path: Path,
                                                                  clients: list[subprocess.Popen[str]]) -> None:
    pgdata = tmp_path / "pgdata"
    first, second = start_client(pgdata, clients), start_client(pgdata, clients)
    server = postmaster(pgdata)
    kill(first)
    assert server.is_running(), "a live client still uses the server"
    assert second.stdin is not None
    second.stdin.close()  # the last live client exits normally, with a dead pid still listed
    assert second.wait(timeout=30) == 0
    server.wait(timeout=STOP_WITHIN_S)  # raises TimeoutExpired while the stale pid keeps it running

    # The last client is killed: no exit handler runs anywhere, and the server still stops.
    third = start_client(pgdata, clients)
    server = postmaster(pgdata)
    kill(third)
    server.wait(timeout=STOP_WITHIN_S)
    assert not (pgdata / "postmaster.pid").exists()  # a clean shutdown, ready for the next run

    # The data stays: a new client starts the server again on the same directory.
    fourth = start_client(pgdata, clients)
    assert postmaster(pgdata).is_running()
    kill(fourth)


def test_a_pgvector_build_this_cpu_cannot_run_is_named_as_such(tmp_path):
    log = ("LOG:  client backend (PID 10347) was terminated by signal 4: Illegal instruction\n"
           "DETAIL:  Failed process was running: SELECT '[1,2,3]'::vector <=> '[3,2,1]'::vector\n")
    message = crash_message(log, tmp_path)
    assert message is not None and "illegal instruction" in message and "DATABASE_URL" in message
    assert crash_message("LOG:  database system is ready to accept connections\n", tmp_path) is None
