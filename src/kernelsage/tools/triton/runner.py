"""The judge's side of the Python runner: start it sandboxed, talk to it, freeze it, end it.

The runner (sandbox/runner.py) is the candidate's process. The judge times every request itself (from
sending it to reading the reply), checks that each reply echoes the request's random nonce, freezes every
process of the sandbox (SIGSTOP) between a reply and the checks of the outputs, and spends the candidate's
wall-clock budget on every wait, killing the sandbox when it runs out. Any reply but the expected success is
the candidate's failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import statistics
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from kernelsage.tools.isolation import Isolation, Rlimits, popen_options, sandboxed
from kernelsage.tools.judging.arena import Arena, sealed_memfd
from kernelsage.tools.judging.core import Budget, RunnerFailed, RunnerLimits
from kernelsage.tools.results import Status
from kernelsage.tools.triton.devices import sandbox_device_args, sandbox_env
from kernelsage.tools.triton.python_view import python_binds

PYTHON_ADDRESS_SPACE = 6 << 30  # Python, torch, triton and numpy mapped, before any tensor
CALIBRATION_PINGS = 9
LOG_TAIL_BYTES = 3000
OUT_OF_MEMORY_WORDS = ("MemoryError", "out of memory", "Cannot allocate memory")


def sandbox_files(kernel_source: str) -> dict[str, bytes]:
    """The files of /ks: the runner, its guard and syscall filter (trusted, from this package) and the candidate."""
    package = resources.files("kernelsage.tools.triton.sandbox")
    trusted = {name: package.joinpath(name).read_bytes() for name in ("runner.py", "guard.py", "syscall_filter.py")}
    return {**trusted, "kernel.py": kernel_source.encode()}


class PyRunner:
    """One started Python runner serving one candidate over one arena."""

    def __init__(self, *, device: str, kernel_source: str, arena: Arena, isolation: Isolation,
                 limits: RunnerLimits, budget: Budget, log_path: Path) -> None:
        self.device, self.arena, self.isolation, self.limits, self.budget = device, arena, isolation, limits, budget
        self.log_path = log_path
        self.init_pid = 0  # the sandbox's pid 1 (what is killed); the runner itself when unisolated
        self.round_trip = 0.0
        started = time.perf_counter()
        try:
            self._spawn(sandbox_files(kernel_source))
            self._wait_hello()
        finally:
            budget.spend(time.perf_counter() - started)

    def _spawn(self, files: dict[str, bytes]) -> None:
        request_read, self._requests = os.pipe()
        self._replies, reply_write = os.pipe()
        os.set_inheritable(request_read, True)
        os.set_inheritable(reply_write, True)
        data_fds = {name: sealed_memfd(f"kernelsage-{name}", data) for name, data in files.items()}
        env = sandbox_env(self.device, self.limits.threads)
        address_space = None if self.device != "interpret" else (
            self.limits.memory_bytes + self.arena.inputs.size + self.arena.outputs.size + PYTHON_ADDRESS_SPACE)
        rlimits = Rlimits(address_space=address_space, cpu_s=int(self.limits.cpu_s),
                          file_bytes=self.limits.file_bytes, processes=512)
        fds = [self.arena.inputs.fd, self.arena.outputs.fd, request_read, reply_write, *data_fds.values()]
        info_read = info_write = -1
        if self.isolation.available:
            folder = "/ks"
            info_read, info_write = os.pipe()
            fds.append(info_write)
            command = sandboxed(self.isolation, [sys.executable, "-I", "-B", f"{folder}/runner.py", *self._args(
                request_read, reply_write)], env=env, limits=rlimits, ro_binds=python_binds(self.isolation),
                data_files=[(fd, f"{folder}/{name}", 0o444) for name, fd in data_fds.items()],
                info_fd=info_write, extra_args=sandbox_device_args(self.device))
        else:  # unsafe: the files in the job's directory, the runner with this user's rights
            folder = str(self.log_path.parent / "ks")
            os.makedirs(folder, exist_ok=True)
            for name, data in files.items():
                Path(folder, name).write_bytes(data)
            command = sandboxed(self.isolation, [sys.executable, "-I", "-B", f"{folder}/runner.py",
                                                 *self._args(request_read, reply_write)], env=env, limits=rlimits)
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=fds,
                                            env=env if not self.isolation.available else {},
                                            **popen_options(self.isolation))
        finally:
            for fd in (log, request_read, reply_write, info_write, *data_fds.values()):
                if fd >= 0:
                    os.close(fd)
        self.init_pid = self._read_init_pid(info_read) if info_read >= 0 else self.process.pid

    def _args(self, request_read: int, reply_write: int) -> list[str]:
        return [self.device, str(self.arena.inputs.fd), str(self.arena.inputs.size), str(self.arena.outputs.fd),
                str(self.arena.outputs.size), str(request_read), str(reply_write)]

    def _read_init_pid(self, fd: int) -> int:
        data = b""
        try:
            while b"child-pid" not in data or b"}" not in data:
                if not select.select([fd], [], [], max(self.budget.left, 0.01))[0]:
                    break
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        try:
            return int(json.loads(data.decode())["child-pid"])
        except (ValueError, KeyError):
            self._fail(Status.RUNTIME_ERROR, "the sandbox did not start")
            return 0

    def _wait_hello(self) -> None:
        self._buffer = b""
        if not self._read_line().get("hello"):
            self._fail(Status.RUNTIME_ERROR, "the runner did not start")
        rounds = [self.call({"op": "ping"})[1] for _ in range(CALIBRATION_PINGS)]
        self.round_trip = statistics.median(rounds)

    # requests ---------------------------------------------------------------------------------------------

    def call(self, request: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Send one request; its reply and the judge's own measure of the round trip, in seconds."""
        nonce = secrets.randbits(62)
        data = (json.dumps({**request, "nonce": nonce}) + "\n").encode()
        started = time.perf_counter()
        try:
            while data:
                data = data[os.write(self._requests, data):]
        except OSError:
            self._died()
        reply = self._read_line()
        seconds = time.perf_counter() - started
        if reply.get("nonce") != nonce:
            self._fail(Status.RUNTIME_ERROR, "the runner answered out of turn (its process was tampered with)")
        return reply, seconds

    def _read_line(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            started = time.perf_counter()
            ready = select.select([self._replies], [], [], max(self.budget.left, 0))[0]
            self.budget.spend(time.perf_counter() - started)
            if not ready:
                self._fail(Status.TIMEOUT, f"killed after the wall-clock limit of {self.budget.total:g} s")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                self._died()
            self._buffer += chunk
            if len(self._buffer) > 1 << 20:
                self._fail(Status.RUNTIME_ERROR, "the runner sent an oversized reply")
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self._fail(Status.RUNTIME_ERROR, "the runner sent a malformed reply")
        return reply

    # freezing ---------------------------------------------------------------------------------------------

    def members(self) -> list[int]:
        """Every process of the sandbox but its pid 1 (its own pid namespace), or the runner when unisolated."""
        if not self.isolation.available:
            return [self.init_pid]
        try:
            namespace = os.stat(f"/proc/{self.init_pid}/ns/pid").st_ino
        except OSError:
            return []
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != self.init_pid:
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{entry}/ns/pid").st_ino == namespace:
                        found.append(int(entry))
        return found

    def freeze(self) -> None:
        """Stop every process of the sandbox and wait until each thread of them is stopped."""
        members = self.members()
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and not all(_stopped(pid) for pid in members):
            time.sleep(0.001)

    def thaw(self) -> None:
        for pid in self.members():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    # ending -----------------------------------------------------------------------------------------------

    def close(self) -> None:
        for pid in (self.init_pid, self.process.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        for fd in (self._requests, self._replies):
            with contextlib.suppress(OSError):
                os.close(fd)

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - LOG_TAIL_BYTES))
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    def _fail(self, status: Status, message: str) -> None:
        self.close()
        raise RunnerFailed(status, message)

    def _died(self) -> None:
        """The runner closed its pipe: it exited or was killed. Why, from how it ended and its log."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        code, tail = self.process.returncode, self.log_tail()
        if any(word in tail for word in OUT_OF_MEMORY_WORDS):
            self._fail(Status.OOM, f"ran out of memory (limit {self.limits.memory_bytes >> 20} MiB)")
        if code is not None and code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            self._fail(Status.TIMEOUT, f"killed after the CPU-time limit of {self.limits.cpu_s:g} s")
        last = tail.strip().splitlines()[-1][:300] if tail.strip() else ""
        self._fail(Status.RUNTIME_ERROR, f"the runner exited (code {code})" + (f": {last}" if last else ""))


def _stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"T", b"t", b"Z", b"X"):
            return False
    return True
