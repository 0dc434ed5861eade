"""`kernelsage memory serve`: a real served database on 127.0.0.1, reached as a node would reach it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("pgserver", reason="the embedded server (kernelsage[embedded]) is required")
psutil = pytest.importorskip("psutil")
if shutil.which("openssl") is None:
    pytest.skip("the openssl command makes the served certificate", allow_module_level=True)

from kernelsage.errors import ConfigurationError  # noqa: E402
from kernelsage.memory_backend.items import NewItem  # noqa: E402
from kernelsage.memory_backend.served import (  # noqa: E402
    hba_text,
    listen_address,
    served_paths,
    served_url,
)
from kernelsage.memory_backend.store import MemoryStore  # noqa: E402
from tests.graph.fakes import fake_embeddings  # noqa: E402
from tests.memory.served_process import START_TIMEOUT_S, Served, free_port, kernelsage, start, stop  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    running = start(tmp_path_factory.mktemp("served") / "db", free_port())
    yield running
    if running.process.poll() is None:
        stop(running)


def test_the_printed_url_opens_a_store_over_tls_as_a_role_without_superuser_rights(served: Served) -> None:
    assert served.url.endswith("sslmode=require") and f"@127.0.0.1:{served.port}/" in served.url
    with psycopg.connect(served.url) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)
    with MemoryStore.connect(served.url) as store:
        memory = store.open("served-test", embeddings=fake_embeddings())
        texts = ["Tile the reduction over warps", "Fuse the bias add into the matmul epilogue"]
        ids = memory.add_items([NewItem(text=text, operator="l1_add") for text in texts])
        found = {scored.item.id for scored in memory.retrieve(texts[1], k=5).cold}
    assert set(ids) <= found


def test_a_node_with_the_certificate_can_check_the_server(served: Served) -> None:
    certificate = served_paths(served.data).certificate
    checked = served.url.replace("sslmode=require", f"sslmode=verify-full&sslrootcert={certificate}")
    with psycopg.connect(checked) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_connection_without_tls_is_refused(served: Served) -> None:
    with pytest.raises(psycopg.OperationalError, match="TLS connections only"):
        psycopg.connect(served.url.replace("sslmode=require", "sslmode=disable"), connect_timeout=10)


def test_a_wrong_password_is_refused(served: Served) -> None:
    password = served.url.split("@")[0].rsplit(":", 1)[1]
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(served.url.replace(f":{password}@", ":not-the-password@"), connect_timeout=10)


def test_nothing_listens_on_any_other_address(served: Served) -> None:
    postmaster = psutil.Process(int((served_paths(served.data).pgdata / "postmaster.pid").read_text().split()[0]))
    processes = [psutil.Process(served.process.pid), postmaster, *postmaster.children(recursive=True)]
    listening = {(c.laddr.ip, c.laddr.port) for p in processes for c in _connections(p)
                 if c.status == psutil.CONN_LISTEN}
    assert listening == {("127.0.0.1", served.port)}


def _connections(process: psutil.Process) -> list[Any]:
    """The process's inet sockets; none for one that ended since it was listed (a server's short-lived
    backend process)."""
    try:
        return process.net_connections(kind="inet")
    except psutil.NoSuchProcess:
        return []


def test_print_url_gives_the_running_url(served: Served) -> None:
    printed = subprocess.run(kernelsage("--print-url", data=served.data), capture_output=True, text=True,
                             timeout=START_TIMEOUT_S, check=True)
    assert printed.stdout.strip() == served.url


@pytest.mark.parametrize("address", ["0.0.0.0", "::"])
def test_every_address_is_refused_without_the_flag(tmp_path: Path, address: str) -> None:
    refused = subprocess.run(kernelsage("--listen", address, data=tmp_path / "db"), capture_output=True,
                             text=True, timeout=START_TIMEOUT_S)
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "--allow-any-address" in refused.stderr
    assert not (tmp_path / "db").exists()
    assert listen_address(address, allow_any=True) == address


def test_restart_keeps_the_password_and_the_data(tmp_path: Path) -> None:
    data, port = tmp_path / "db", free_port()
    first = start(data, port)
    with MemoryStore.connect(first.url) as store:
        kept = store.open("kept", embeddings=fake_embeddings()).add_items([NewItem(text="Vectorise the tail")])
    code, said = stop(first)
    assert code == 130 and "stopped serving" in said
    after_stop = subprocess.run(kernelsage("--print-url", data=data), capture_output=True, text=True,
                                timeout=START_TIMEOUT_S)
    assert after_stop.returncode == 2 and "no database is served" in after_stop.stderr
    again = start(data, port)
    try:
        assert again.url == first.url
        with MemoryStore.connect(again.url) as store:
            memory = store.open("kept", embeddings=fake_embeddings(), create=False)
            assert [scored.item.id for scored in memory.retrieve("Vectorise the tail", k=3).cold] == kept
    finally:
        stop(again)


def test_the_connection_text_names_the_served_role_over_tls() -> None:
    assert served_url("p/w+", "::1", 6000) == "postgresql://kernelsage:p%2Fw%2B@[::1]:6000/kernelsage?sslmode=require"
    rules = [line.split() for line in hba_text().splitlines() if line and not line.startswith("#")]
    assert rules == [["local", "all", "all", "scram-sha-256"]]
    with pytest.raises(ConfigurationError, match="not an IP address"):
        listen_address("my-host")


def test_two_serves_of_one_directory_started_at_once_leave_one_serving(tmp_path: Path) -> None:
    data = tmp_path / "db"
    both = [subprocess.Popen(kernelsage("--listen", "127.0.0.1", "--port", str(free_port()), data=data),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "KERNELSAGE_HOME": str(tmp_path / "home")}) for _ in range(2)]
    firsts = [process.stdout.readline().strip() for process in both]  # the URL, or "" once a refused one ends
    serving = [p for p, line in zip(both, firsts, strict=True) if line.startswith("DATABASE_URL=")]
    refused = [p for p in both if p not in serving]
    try:
        assert len(serving) == 1 and len(refused) == 1, firsts
        _, said = refused[0].communicate(timeout=START_TIMEOUT_S)
        assert refused[0].returncode == 2 and "served already" in said and len(said.strip().splitlines()) == 1
    finally:
        for process in serving:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=START_TIMEOUT_S)
