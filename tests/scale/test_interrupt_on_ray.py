"""Ctrl-C or SIGTERM on the driver of `compare --ray local`: the streams stop with the cluster, and the command
names the --run-id that resumes the run; off a terminal, the driver said each stream's progress as it went. The model is a local OpenAI-compatible TEST DOUBLE (tests.scale.helpers)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.models.openai_server import serve
from tests.scale.helpers import InFlight, compare_args, env, order_file, stream_workers

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])  # ray.init's own SIGTERM handler is undone
def test_ctrl_c_stops_the_streams_and_names_the_run_id(database_url: str, tmp_path: Path,
                                                       stop: signal.Signals) -> None:
    run_id, calls = f"int-{uuid.uuid4().hex[:6]}", InFlight()
    with serve([calls.behaviour(2.0)]) as server:
        driver = subprocess.Popen(
            [sys.executable, "-m", "kernelsage", *compare_args(run_id, f"int-{run_id}", order_file(tmp_path)),
             "--ray", "local", "--ray-cpus", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env(database_url, server.url, tmp_path), cwd=tmp_path, stdin=subprocess.DEVNULL)
        lines: list[str] = []  # stderr, read as it comes: the progress lines are awaited before the signal
        reader = threading.Thread(target=lambda: lines.extend(iter(driver.stderr.readline, "")), daemon=True)
        reader.start()
        deadline = time.monotonic() + 240
        while (calls.total < 1 or not any(" progress: " in line for line in lines)) and time.monotonic() < deadline:
            time.sleep(0.1)  # the streams are under way, and the driver has said so
        # stderr is a pipe: the board's changes were lines (kernelsage.cli.run_log)
        assert calls.total >= 1 and any(" progress: " in line for line in lines), "".join(lines)[-2000:]
        assert stream_workers(driver.pid)
        driver.send_signal(stop)
        driver.wait(timeout=60)
        reader.join(timeout=30)
        err = "".join(lines)
        assert driver.returncode == 130, err[-2000:]
        assert f"kernelsage compare --run-id {run_id}" in err
        gone = time.monotonic() + 30  # workers notice their raylet is gone in their own time
        while stream_workers() and time.monotonic() < gone:
            time.sleep(0.2)
        assert stream_workers() == {}  # no stream goes on without its driver (orphans included)
        seen = calls.total
        time.sleep(4)
        assert calls.total == seen  # and nothing calls the model any more
