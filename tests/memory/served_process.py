"""`kernelsage memory serve` in its own process, as a user starts and stops it (shared by the tests that need a
database every node of a cluster reaches)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_S = 60


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str
    data: Path
    port: int


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kernelsage(*args: str, data: Path) -> list[str]:
    return [sys.executable, "-m", "kernelsage", "memory", "serve", *args, "--data", str(data)]


def start(data: Path, port: int) -> Served:
    """`memory serve` in its own process; returns once it printed the URL (its only line on stdout)."""
    process = subprocess.Popen(kernelsage("--listen", "127.0.0.1", "--port", str(port), data=data),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "KERNELSAGE_HOME": str(data.parent / "home")})
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("DATABASE_URL="):
        process.kill()
        pytest.fail(f"no URL printed: {line!r} {process.communicate(timeout=10)}")
    return Served(process, line.removeprefix("DATABASE_URL="), data, port)


def stop(served: Served) -> tuple[int, str]:
    """Ctrl-C, as a user stops it: the exit code and what it said on stderr."""
    served.process.send_signal(signal.SIGINT)
    _, err = served.process.communicate(timeout=START_TIMEOUT_S)
    return served.process.returncode, err
