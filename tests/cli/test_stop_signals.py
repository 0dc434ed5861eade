"""SIGTERM (what `kill`, `timeout`, systemd, Docker and CI send) stops a run as Ctrl-C does: within seconds,
one line naming what was kept and the command that resumes it, exit code 130. Real subprocesses throughout."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.cli.test_exit_codes import INTERRUPTED_STREAM, ROOT
from tests.cli.test_output import _env, _stream_args
from tests.models.openai_server import hang, serve


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_stops_as_ctrl_c_does_even_when_the_unwinding_waits(tmp_path: Path, stop: signal.Signals) -> None:
    process = subprocess.Popen([sys.executable, "-c", INTERRUPTED_STREAM, str(tmp_path / "runs" / "r1")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    signalled = time.monotonic()
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=30)
    took = time.monotonic() - signalled
    assert process.returncode == 130 and took < 10, (stop, took, stderr)
    assert stderr.count("interrupted") == 1 and "Traceback" not in stderr, stderr


STUCK_STREAM = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    import typer
    from kernelsage.cli.interrupt import interruptible, interrupted_message

    def unwinding_that_never_ends():  # like native code that does not return to Python while it waits
        worker = threading.Thread(target=time.sleep, args=(60,), daemon=True)
        worker.start()
        try:
            print("ready", flush=True)
            time.sleep(60)
        finally:
            while worker.is_alive():
                try:
                    worker.join()
                except KeyboardInterrupt:
                    pass

    try:
        with interruptible(lambda: interrupted_message(Path(sys.argv[1]), "r1", "run"), grace_s=60.0):
            unwinding_that_never_ends()
    except typer.Exit as done:
        sys.exit(done.exit_code)
""")


def test_a_second_sigterm_ends_at_once(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", STUCK_STREAM, str(tmp_path / "runs" / "r1")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert process.poll() is None  # the first waits for the unwinding (its grace is 60 s here)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130 and time.monotonic() - signalled < 10, stderr  # not the 60 s grace
    assert stderr.count("interrupted") == 1, stderr


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stopped_run_names_the_run_id_and_the_command_that_resumes_it(database_url: str, tmp_path: Path,
                                                                       stop: signal.Signals) -> None:
    run_id = f"stop-{uuid.uuid4().hex[:6]}"
    with serve([hang(60)]) as server:
        process = subprocess.Popen(
            [sys.executable, "-m", "kernelsage", "run", *_stream_args(run_id, f"stop-{run_id}")],
            env=_env(database_url, server.url, tmp_path), cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while not server.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        assert server.requests, "the run never asked the model"
        signalled = time.monotonic()
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and time.monotonic() - signalled < 30, stderr[-3000:]
    # The resume command pastes as printed: this test started kernelsage as `<python> -m kernelsage`.
    assert f"-m kernelsage run --run-id {run_id}` and the same options" in stderr, stderr[-3000:]
    assert "resume with `" in stderr and "Traceback" not in stderr
