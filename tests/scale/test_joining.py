"""Joining a cluster as docs/scale.md says: a head started with `ray start --head` and token authentication, the
memory served by `kernelsage memory serve` (TLS, password), a driver with the token and the printed DATABASE_URL
joins and runs; without the token, with a wrong one, to a cluster that checks none, or where
nothing listens, the command ends in one line and exit 2, within bounded time.

The head runs on this host's loopback (Ray's single-host switch, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, keeps it
there) in a temp folder of its own; the docs' multi-host steps differ only in the address each node names.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.memory.served_process import free_port, start, stop

pytestmark = pytest.mark.slow
RAY = str(Path(sys.executable).with_name("ray"))
STUDY = ("simulate", "--policies", "sage", "--orders", "mixed", "--seeds", "1", "--episodes", "3", "--no-report",
         "--json")


def _environment(**settings: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("RAY_AUTH", "RAY_ADDRESS", "KERNELSAGE_RAY"))}
    return {**environment, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **settings}


def _stop(temp_dir: Path) -> None:
    """Stop this cluster's processes only (`ray stop` would stop every cluster on the machine)."""
    mine = [p for p in psutil.process_iter(["cmdline"]) if str(temp_dir) in " ".join(p.info["cmdline"] or [])]
    for process in mine:
        process.terminate()
    psutil.wait_procs(mine, timeout=3)
    for process in mine:
        if process.is_running():
            process.kill()
    shutil.rmtree(temp_dir, ignore_errors=True)


def _head(tmp_path: Path, **settings: str) -> Iterator[str]:
    port, temp_dir = free_port(), Path(f"/tmp/ks-join-{secrets.token_hex(4)}")  # short: Ray's socket paths
    started = subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                              "--num-cpus=2", f"--temp-dir={temp_dir}", "--include-dashboard=false",
                              "--disable-usage-stats"], capture_output=True, text=True, timeout=120,
                             env=_environment(**settings), stdin=subprocess.DEVNULL)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        yield f"127.0.0.1:{port}"
    finally:
        _stop(temp_dir)


@pytest.fixture(scope="module")
def token() -> str:
    return secrets.token_hex(32)


@pytest.fixture(scope="module")
def guarded_head(tmp_path_factory: pytest.TempPathFactory, token: str) -> Iterator[str]:
    yield from _head(tmp_path_factory.mktemp("guarded"), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)


def _simulate(address: str, database_url: str, *extra: str, **settings: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "kernelsage", *STUDY, "--ray", address, *extra],
                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                            env=_environment(DATABASE_URL=database_url, **settings))
    return result, time.monotonic() - started


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and result.stdout == "", result.stderr
    return lines[0]


def test_a_driver_with_the_token_joins_and_uses_the_served_memory(guarded_head: str, token: str,
                                                                   tmp_path: Path) -> None:
    served = start(tmp_path / "served", free_port())
    try:
        result, _ = _simulate(guarded_head, served.url, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    finally:
        stop(served)
    assert result.returncode == 0, result.stderr[-3000:]
    study = json.loads(result.stdout)
    assert study["invariant_problems"] == [] and "sage" in study["policies"]


def test_a_driver_without_the_token_or_with_another_is_refused(guarded_head: str, database_url: str) -> None:
    for settings, sent in (({"RAY_AUTH_MODE": "disabled"}, "sent no token"),
                           ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}, "does not accept")):
        result, seconds = _simulate(guarded_head, database_url, **settings)
        line = _one_line(result)
        assert "refused this driver" in line and sent in line and "RAY_AUTH_TOKEN" in line, line
        assert seconds < 60, seconds


def test_a_cluster_that_checks_no_token_is_joined_only_when_the_user_says_so(tmp_path: Path,
                                                                            database_url: str) -> None:
    for address in _head(tmp_path, RAY_AUTH_MODE="disabled"):
        line = _one_line(_simulate(address, database_url)[0])
        assert "does not check tokens" in line and "--ray-insecure" in line, line
        result, _ = _simulate(address, database_url, "--ray-insecure")
        assert result.returncode == 0, result.stderr[-3000:]


def test_an_address_where_nothing_answers_ends_in_bounded_time(database_url: str) -> None:
    result, seconds = _simulate(f"127.0.0.1:{free_port()}", database_url)
    line = _one_line(result)
    assert "no Ray cluster answered" in line and "Connection refused" in line, line
    assert seconds < 30, seconds
