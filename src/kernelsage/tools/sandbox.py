"""The sandbox, parent side: a warm worker process that forks one limited child per job.

The worker (`kernelsage.tools.worker`) starts once, imports torch and the job handlers, and then forks a
child for every compile, verify or profile. The child is the trusted side of the job (the judge): it gets
its own session, a private working directory, an environment without secrets and resource limits, and it
starts the isolated processes that do the untrusted work (`kernelsage.tools.isolation`). The worker
enforces a wall-clock limit on the child whatever happens on its pipes and kills its whole process group.
A worker that dies or stops answering becomes the job's classified result (harness_error) and a fresh
worker serves the next job.

Blame: the child reports the phase it is in. Time and faults in the phases where the candidate's own work
runs ("compile", "candidate") are the candidate's; anything else (loading the task, references, comparison,
a crash of the judge itself) is the harness's.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
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
    memory_bytes: int = 2 << 30  # address space of the untrusted process (a kernel: beyond its tensors)
    file_bytes: int = 256 << 20
    isolate_network: bool = True
    harness_wall_s: float = 120.0  # the trusted side's own time (references, comparisons), on top of wall_s
    harness_memory_bytes: int = 8 << 30  # the trusted child's address space beyond what the worker maps


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
    worker_error: str = ""  # the worker died or stopped answering during the job

    def result(self) -> dict[str, Any] | None:
        """The data of the handler's final 'result' event, if it got that far."""
        for event in reversed(self.events):
            if event.get("kind") == "result":
                return event.get("data")
        return None

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e.get("kind") == kind), None)

    @property
    def phase(self) -> str:
        """The phase the child last reported ('' before any)."""
        return (self.last("phase") or {}).get("phase", "")


CANDIDATE_PHASES = ("compile", "candidate")  # where the time and the faults are the candidate's


def classify_crash(outcome: ChildOutcome, limits: Limits) -> tuple[Status, str]:
    """The failure class and a one-line explanation of a child that ended without a result.

    The child is the trusted judge and never runs candidate code, so its own failures are the harness's;
    only running out of time while the candidate's work runs is the candidate's.
    """
    phase = outcome.phase or "start"
    error = outcome.last("error") or {}
    if outcome.worker_error:
        return Status.HARNESS_ERROR, outcome.worker_error
    if outcome.prepare_error:
        return Status.HARNESS_ERROR, outcome.prepare_error
    if outcome.timed_out:
        if phase in CANDIDATE_PHASES:
            return Status.TIMEOUT, f"killed after the wall-clock limit of {limits.wall_s:g} s"
        return Status.HARNESS_ERROR, (f"the harness ran out of time in its {phase!r} phase (limit "
                                      f"{limits.wall_s + limits.harness_wall_s:g} s)")
    if error:
        what = "ran out of memory" if error.get("type") == "MemoryError" else "failed"
        return Status.HARNESS_ERROR, (f"the harness {what} in its {phase!r} phase: {error.get('type', 'error')}: "
                                      f"{error.get('message', '')}")
    if outcome.signal is not None:
        return Status.HARNESS_ERROR, f"the harness crashed with {signal_name(outcome.signal)} in its {phase!r} phase"
    return Status.HARNESS_ERROR, f"the harness exited with code {outcome.exit_code} before reporting a result"


def signal_name(number: int | None) -> str:
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
        self.root = Path(tempfile.mkdtemp(prefix="kernelsage-sandbox-"))  # 0700; see isolation.give_to_sandbox
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
        deadline = time.monotonic() + timeout
        ready: list[Any] = []
        # Watched, not only waited on: a job's child can still hold the worker's stdout after the worker died,
        # so no end of file comes until that child ends (at its own limits, minutes later).
        while not ready and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], min(1.0, max(0.0, deadline - time.monotonic())))
            if not ready and process.poll() is not None:
                break
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
        """Run `handler` (module:function) on `payload` in a fresh child whose working directory is `workdir`.

        A worker that dies or stops answering is killed and replaced; the job's outcome then says so
        (`worker_error`) instead of raising, so the caller classifies it and goes on.
        """
        with self._lock:
            self._next_id += 1
            request = {"id": self._next_id, "handler": handler, "payload": payload, "workdir": str(workdir),
                       "limits": asdict(limits)}
            for attempt in range(2):  # a worker found dead before it took the job is replaced, once
                if self._process is None or self._process.poll() is not None:
                    self._process = self._start()
                assert self._process.stdin is not None
                try:
                    self._process.stdin.write(json.dumps(request).encode() + b"\n")
                    self._process.stdin.flush()
                    break
                except BrokenPipeError:
                    self._discard_worker()
                    if attempt:
                        return ChildOutcome(worker_error="the sandbox worker exited before taking the job")
            try:
                reply = json.loads(self._read_line(self._process, limits.wall_s + limits.harness_wall_s + 60))
            except BackendError as exc:
                self._process = None
                return ChildOutcome(worker_error=f"{exc}; a fresh worker serves the next job")
            if reply.get("id") != self._next_id:
                self._discard_worker()
                return ChildOutcome(worker_error=f"the sandbox worker answered job {reply.get('id')} for "
                                                 f"{self._next_id}; a fresh worker serves the next job")
            return ChildOutcome(**{k: v for k, v in reply.items() if k != "id"})

    def _discard_worker(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(OSError):
                process.kill()
            process.wait()

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
