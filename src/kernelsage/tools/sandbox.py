"""The sandbox, parent side: a warm worker process that forks one limited child per job.

The worker (`kernelsage.tools.worker`) starts once, imports torch and the job handlers, and then forks a
child for every compile, verify or profile. The child gets its own session, a private working directory,
an environment without secrets, memory / CPU-time / file-size limits and, where the OS allows, its own
empty network namespace; the worker enforces a wall-clock timeout and reports how the child ended. Only
the child runs untrusted code, so neither the worker nor this process can be brought down by a candidate.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelsage.errors import BackendError
from kernelsage.tools.results import Status

# Environment variables a child may see; everything else (API keys, tokens, DATABASE_URL, ...) is dropped.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "VIRTUAL_ENV", "TZ")
STARTUP_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Limits:
    """What one sandboxed child may use."""

    wall_s: float = 60.0
    cpu_s: float = 120.0
    memory_bytes: int = 2 << 30  # address space beyond what the worker already maps
    file_bytes: int = 256 << 20
    isolate_network: bool = True


@dataclass
class ChildOutcome:
    """How a child ended, as the worker saw it."""

    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr_tail: str = ""
    max_rss_kb: int = 0
    network_isolated: bool = False
    prepare_error: str = ""

    def result(self) -> dict[str, Any] | None:
        """The data of the handler's final 'result' event, if it got that far."""
        for event in reversed(self.events):
            if event.get("kind") == "result":
                return event.get("data")
        return None

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e.get("kind") == kind), None)


def classify_crash(outcome: ChildOutcome, limits: Limits) -> tuple[Status, str]:
    """The failure class and a one-line explanation of a child that ended without a result."""
    text = outcome.stderr_tail
    error = outcome.last("error") or {}
    baseline = (outcome.last("started") or {}).get("rss_kb", 0)
    growth_bytes = max(outcome.max_rss_kb - baseline, 0) * 1024
    signame = _signal_name(outcome.signal)
    if outcome.prepare_error:
        return Status.HARNESS_ERROR, outcome.prepare_error
    if outcome.timed_out:
        return Status.TIMEOUT, f"killed after the wall-clock limit of {limits.wall_s:g} s"
    if outcome.signal == signal.SIGXCPU:
        return Status.TIMEOUT, f"killed after the CPU-time limit of {limits.cpu_s:g} s"
    out_of_memory_words = ("std::bad_alloc", "MemoryError", "Cannot allocate memory", "out of memory")
    if error.get("type") == "MemoryError" or any(word in text for word in out_of_memory_words):
        return Status.OOM, f"ran out of memory (limit {limits.memory_bytes >> 20} MiB)"
    if outcome.signal is not None and (outcome.signal == signal.SIGKILL
                                       or growth_bytes >= 0.75 * limits.memory_bytes):
        return Status.OOM, (f"{signame} after using {growth_bytes >> 20} MiB (limit "
                            f"{limits.memory_bytes >> 20} MiB)")
    if outcome.signal is not None:
        return Status.RUNTIME_ERROR, f"crashed with {signame}"
    if error:
        return Status.HARNESS_ERROR if error.get("harness") else Status.RUNTIME_ERROR, \
            f"{error.get('type', 'error')}: {error.get('message', '')}"
    return Status.RUNTIME_ERROR, f"exited with code {outcome.exit_code} before reporting a result"


def _signal_name(number: int | None) -> str:
    if number is None:
        return "no signal"
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def scrubbed_environment(extra: dict[str, str]) -> dict[str, str]:
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    env.update(extra)
    return env


class Sandbox:
    """A warm worker that runs jobs in forked, limited children. Thread-safe: one job at a time."""

    def __init__(self, *, threads: int, preload: tuple[str, ...] = ()) -> None:
        self.threads = threads
        self.preload = preload
        self.root = Path(tempfile.mkdtemp(prefix="kernelsage-sandbox-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._next_id = 0
        atexit.register(self.close)

    def _start(self) -> subprocess.Popen[bytes]:
        env = scrubbed_environment({
            "HOME": str(self.root), "TMPDIR": str(self.root), "OMP_NUM_THREADS": str(self.threads),
            "MKL_NUM_THREADS": str(self.threads), "KERNELSAGE_PRELOAD": ",".join(self.preload),
            # Two OpenMP runtimes share a child (torch's and the one the kernel links); idle threads of one
            # spinning on the cores starve the other, so idle threads sleep instead of spinning.
            "OMP_WAIT_POLICY": "PASSIVE",
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        log = (self.root / "worker.log").open("ab")
        process = subprocess.Popen([sys.executable, "-m", "kernelsage.tools.worker"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=log, env=env, cwd=self.root)
        log.close()
        line = self._read_line(process, STARTUP_TIMEOUT_S)
        if json.loads(line).get("ready") is not True:
            raise BackendError(f"the sandbox worker did not start: {line!r}")
        return process

    def _read_line(self, process: subprocess.Popen[bytes], timeout: float) -> bytes:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        line = process.stdout.readline() if ready else b""
        if not line:
            process.kill()
            process.wait()
            log = (self.root / "worker.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise BackendError(f"the sandbox worker stopped answering (exit code {process.returncode})"
                               + (f": {' | '.join(log)}" if log else ""))
        return line

    def workdir(self) -> Path:
        """A fresh private directory for one job (remove it with `discard`)."""
        return Path(tempfile.mkdtemp(prefix="job-", dir=self.root))

    @staticmethod
    def discard(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def run(self, handler: str, payload: dict[str, Any], limits: Limits, workdir: Path) -> ChildOutcome:
        """Run `handler` (module:function) on `payload` in a fresh child whose working directory is `workdir`."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = self._start()
            self._next_id += 1
            request = {"id": self._next_id, "handler": handler, "payload": payload, "workdir": str(workdir),
                       "limits": asdict(limits)}
            assert self._process.stdin is not None
            try:
                self._process.stdin.write(json.dumps(request).encode() + b"\n")
                self._process.stdin.flush()
            except BrokenPipeError as exc:
                self._process = None
                raise BackendError("the sandbox worker exited; it will be restarted on the next job") from exc
            try:
                reply = json.loads(self._read_line(self._process, limits.wall_s + 60))
            except BackendError:
                self._process = None
                raise
            if reply.get("id") != self._next_id:
                raise BackendError(f"the sandbox worker answered job {reply.get('id')} for {self._next_id}")
            return ChildOutcome(**{k: v for k, v in reply.items() if k != "id"})

    def close(self) -> None:
        """Stop the worker and remove the sandbox's directories."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            try:
                assert process.stdin is not None
                process.stdin.close()
                process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
        shutil.rmtree(self.root, ignore_errors=True)
