"""The judge's side of the runner: start ks_runner isolated, talk to it, freeze it, end it.

The runner (native/ks_runner.c) is the candidate's process: it loads the library and runs ks_kernel when
asked. Everything it sends back is untrusted: the judge keeps the clock (the request/response round trip),
checks that each reply echoes its request's random nonce, freezes the runner (SIGSTOP of every thread)
between a reply and the checks of its outputs, and enforces the candidate's wall-clock budget on every wait
by killing the sandbox (pid 1 of its PID namespace, so nothing of it survives). Any reply but the expected
success is the candidate's failure: once its library is loaded, the candidate controls the whole process.

A kernel call is timed from sending its request to freezing the runner after the reply, so whatever its
threads do after the reply, until the freeze takes hold, is inside the time. The same interval for an empty
request, subtracted from every timed call, is calibrated before the library is loaded, while only the
runner's own code runs: a library that slows the runner's answers down (by patching its calls to read or
write, say) can then only make its own calls slower, never the calibration.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import statistics
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

from kernelsage.tools.cpu.binaries import interpreter, runtime_files
from kernelsage.tools.cpu.pidfds import child_pidfd, signal_pidfd
from kernelsage.tools.isolation import Isolation, Rlimits, popen_options, sandboxed
from kernelsage.tools.judging.arena import Arena, sealed_memfd
from kernelsage.tools.judging.core import Budget, RunnerFailed, RunnerLimits
from kernelsage.tools.judging.verdicts import classify_runner_exit
from kernelsage.tools.results import Status

REQUEST = struct.Struct("<IIQQQ")
REPLY = struct.Struct("<QiiQQ")
OP_PING, OP_DEFINE, OP_RUN, OP_LOAD = 1, 2, 3, 5
ST_OK, ST_ERROR, ST_FAULT, ST_READY = 0, 1, 2, 3
READY_NONCE, FAULT_NONCE = 0x6B7372756E6E6572, 0x6B736661756C7421
BASE_ADDRESS_SPACE = 256 << 20  # the runner, libc, libstdc++, libgomp
PER_THREAD_ADDRESS_SPACE = 80 << 20  # a thread's stack and malloc arena reservations
LOG_TAIL_BYTES = 4000
CALIBRATION_PINGS = 15


class Runner:
    """One started ks_runner serving one library over one arena."""

    def __init__(self, *, executable: bytes, library: bytes, arena: Arena, isolation: Isolation,
                 limits: RunnerLimits, budget: Budget, log_path: Path) -> None:
        self.arena, self.limits, self.budget, self.log_path = arena, limits, budget, log_path
        self.isolation = isolation
        self.pid = 0  # the runner's host pid (what is frozen)
        self._init_pid = 0  # bwrap's pid 1 of the sandbox (what is killed)
        self._runner_fd = self._init_fd = -1  # pidfds: signals never reach a process that reused a pid
        self.inputs_base = 0
        self.fault: tuple[int, int] | None = None
        self._timed_out = False
        self._status: int | None = None
        self._maxrss_kb = 0
        self._cpu_s = 0.0
        self._info = -1
        self._ready = False
        self.round_trip = 0.0  # the median round trip of an empty request, measured before the library loads
        self.sent_at = 0.0  # when the last request was sent (perf_counter)
        started = time.perf_counter()
        try:
            self._spawn(executable, library)
        finally:
            budget.spend(time.perf_counter() - started)

    def _spawn(self, executable: bytes, library: bytes) -> None:
        """Start the sandbox; the runner loads the library while the judge goes on (see `_wait_ready`)."""
        library_fd = sealed_memfd("kernelsage-kernel", library)
        fds = [library_fd, self.arena.inputs.fd, self.arena.outputs.fd]
        args = [f"/proc/self/fd/{library_fd}", str(self.arena.inputs.fd), str(self.arena.inputs.size),
                str(self.arena.outputs.fd), str(self.arena.outputs.size)]
        tensors = self.arena.inputs.size + self.arena.outputs.size
        rlimits = Rlimits(address_space=self.limits.memory_bytes + tensors + BASE_ADDRESS_SPACE
                          + PER_THREAD_ADDRESS_SPACE * self.limits.threads,
                          cpu_s=int(self.limits.cpu_s), file_bytes=self.limits.file_bytes, processes=512)
        env = {"OMP_NUM_THREADS": str(self.limits.threads), "OMP_WAIT_POLICY": "PASSIVE", "LANG": "C",
               "PATH": "/usr/bin:/bin"}
        info_read = info_write = executable_fd = -1
        if self.isolation.available:
            executable_fd = sealed_memfd("kernelsage-runner", executable)
            info_read, info_write = os.pipe()
            fds += [executable_fd, info_write]
            command = sandboxed(self.isolation, ["/ks/ks_runner", *args], env=env, limits=rlimits,
                                data_files=[(executable_fd, "/ks/ks_runner", 0o555)], info_fd=info_write,
                                system_files=runtime_files(interpreter(executable)))
        else:
            path = self.log_path.with_name("ks_runner")
            path.write_bytes(executable)
            path.chmod(0o500)
            command = sandboxed(self.isolation, [str(path), *args], env=env, limits=rlimits)
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                            pass_fds=fds, env=env if not self.isolation.available else {},
                                            **popen_options(self.isolation))
        finally:
            for fd in (log, library_fd, executable_fd, info_write):
                if fd >= 0:
                    os.close(fd)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in, self._out = self.process.stdin.fileno(), self.process.stdout.fileno()
        os.set_blocking(self._in, False)
        self._info = info_read

    def _wait_ready(self) -> None:
        """Wait for the runner's hello, find its pid, calibrate the round trip, then have it load the library."""
        self._ready = True
        if self._info >= 0:
            info = self._read_info(self._info)
            self._init_pid = int(info.get("child-pid", 0))
            self._init_fd = child_pidfd(self._init_pid, self.process.pid)
        nonce, status, _, in_base, _ = self._reply()
        if nonce != READY_NONCE or status != ST_READY:
            self._fail(Status.RUNTIME_ERROR, "the kernel runner did not start")
        self.inputs_base = in_base
        self.pid = self._find_runner() if self._init_pid else self.process.pid
        self._runner_fd = child_pidfd(self.pid, self._init_pid or os.getpid())
        if self._runner_fd < 0:
            self._died()
        self.round_trip = statistics.median([self._frozen_round_trip() for _ in range(CALIBRATION_PINGS + 1)][1:])
        status, _ = self._request(OP_LOAD)
        if status != ST_OK:
            self._fail(Status.RUNTIME_ERROR, "the kernel library could not be loaded (ks_kernel missing or a "
                                             "load-time error)")

    def _frozen_round_trip(self) -> float:
        """An empty request timed as a kernel call is: from sending it to freezing the runner after the reply."""
        self._request(OP_PING)
        seconds = self.freeze() - self.sent_at
        self.thaw()
        return seconds

    def _read_info(self, fd: int) -> dict:
        chunks = []
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], max(self.budget.left, 0.01))
                if not ready:
                    break
                data = os.read(fd, 4096)
                if not data:
                    break
                chunks.append(data)
        finally:
            os.close(fd)
        try:
            return json.loads(b"".join(chunks) or b"{}")
        except ValueError:
            return {}

    def _find_runner(self) -> int:
        """The sandbox's pid 1 (bwrap's reaper) has one child: the runner."""
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError):
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
                if int(fields[1]) == self._init_pid:
                    return int(entry)
        self._fail(Status.RUNTIME_ERROR, "the runner exited while starting")
        return 0

    # requests ------------------------------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            started = time.perf_counter()
            _, writable, _ = select.select([], [self._in], [], max(self.budget.left, 0))
            self.budget.spend(time.perf_counter() - started)
            if not writable:
                self._fail(Status.TIMEOUT, self._timeout_message())
            try:
                view = view[os.write(self._in, view):]
            except BrokenPipeError:
                self._died()

    def _reply(self) -> tuple[int, int, int, int, int]:
        data = b""
        while len(data) < REPLY.size:
            started = time.perf_counter()
            ready, _, _ = select.select([self._out], [], [], max(self.budget.left, 0))
            self.budget.spend(time.perf_counter() - started)
            if not ready:
                self._fail(Status.TIMEOUT, self._timeout_message())
            chunk = os.read(self._out, REPLY.size - len(data))
            if not chunk:
                self._died()
            data += chunk
        reply = REPLY.unpack(data)
        if reply[0] == FAULT_NONCE and reply[1] == ST_FAULT:
            self.fault = (reply[2], reply[3])
            self._died()
        return reply

    def _request(self, op: int, set_id: int = 0, slot_offset: int = 0, payload: bytes = b"") -> tuple[int, int]:
        """Send one request; (status, value) of its reply, and the round trip in seconds as `self.last`."""
        if not self._ready:
            self._wait_ready()
        ready, _, _ = select.select([self._out], [], [], 0)
        if ready:  # nothing may be waiting before we ask: a reply written ahead is a forgery
            early = os.read(self._out, REPLY.size)
            if not early:
                self._died()
            if len(early) == REPLY.size and REPLY.unpack(early)[:2] == (FAULT_NONCE, ST_FAULT):
                self.fault = REPLY.unpack(early)[2:4]
                self._died()
            self._fail(Status.RUNTIME_ERROR, "the kernel wrote to the harness's channel")
        nonce = secrets.randbits(63)
        started = self.sent_at = time.perf_counter()
        self._send(REQUEST.pack(op, set_id, nonce, slot_offset, len(payload)) + payload)
        answer, status, value, _, _ = self._reply()
        self.last = time.perf_counter() - started
        if answer != nonce:
            self._fail(Status.RUNTIME_ERROR, "the kernel wrote to the harness's channel")
        return status, value

    def define(self, set_id: int, description: bytes) -> None:
        status, _ = self._request(OP_DEFINE, set_id, payload=description)
        if status != ST_OK:
            self._fail(Status.RUNTIME_ERROR, f"the runner refused the description of input set {set_id}: the "
                                             "kernel interfered with the runner")

    def run(self, set_id: int, slot_offset: int = 0) -> tuple[int, float]:
        """ks_kernel on one set, outputs at `slot_offset`: its return code and the round trip in seconds."""
        status, value = self._request(OP_RUN, set_id, slot_offset)
        if status != ST_OK:
            self._fail(Status.RUNTIME_ERROR, f"the runner refused a call on input set {set_id}: the kernel "
                                             "interfered with the runner")
        return value, self.last

    # freezing ------------------------------------------------------------------------------------------

    def freeze(self) -> float:
        """Stop every thread of the runner (SIGSTOP); the perf_counter when the signal was sent. A sleeping
        thread stops before it could run again; a running one at the interrupt the signal sends its CPU.
        `settled` confirms it before outputs are read. A kernel call is timed up to this moment, so work its
        threads do after its reply, before they stop, is inside the measured time."""
        if not self._ready:
            self._wait_ready()
        signal_pidfd(self._runner_fd, signal.SIGSTOP)
        return time.perf_counter()

    def settled(self) -> None:
        """Wait until every thread of the frozen runner is stopped (normally at once: time has passed)."""
        started = time.perf_counter()
        deadline = started + min(2.0, max(self.budget.left, 0.0))
        try:
            while not all(state in b"TtZX" for state in self._thread_states()):
                if self._runner_fd < 0 or select.select([self._runner_fd], [], [], 0)[0]:
                    return  # it has exited: the next request finds out why
                if time.perf_counter() > deadline:
                    if self.budget.left - (time.perf_counter() - started) <= 0:
                        self._fail(Status.TIMEOUT, self._timeout_message())
                    self._fail(Status.RUNTIME_ERROR, "the kernel's threads could not be stopped")
                os.sched_yield()  # they are waiting for a CPU to stop on
        finally:
            self.budget.spend(time.perf_counter() - started)  # the kernel's threads decide how long this takes

    def _thread_states(self) -> list[int]:
        states = []
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return []
        for tid in tasks:
            with contextlib.suppress(OSError), open(f"/proc/{self.pid}/task/{tid}/stat", "rb") as handle:
                states.append(handle.read().rsplit(b")", 1)[1].split()[0][0])
        return states

    def thaw(self) -> None:
        signal_pidfd(self._runner_fd, signal.SIGCONT)

    # ending --------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the sandbox (everything in its PID namespace) and reap it."""
        if self._status is None:
            signal_pidfd(self._init_fd, signal.SIGKILL)  # pid 1 of the sandbox: its whole PID namespace dies
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.process.pid, signal.SIGKILL)  # our child, not yet reaped: its pid is still its
        self._reap()
        for fd in (self._runner_fd, self._init_fd):
            if fd >= 0:
                os.close(fd)
        self._runner_fd = self._init_fd = -1

    def _record(self, status: int, usage: Any) -> None:
        self._status, self._maxrss_kb = status, usage.ru_maxrss
        self._cpu_s = usage.ru_utime + usage.ru_stime
        self.process.returncode = os.waitstatus_to_exitcode(status)

    def _reap(self) -> None:
        if self._status is None:
            _, status, usage = os.wait4(self.process.pid, 0)
            self._record(status, usage)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def _fail(self, status: Status, message: str) -> None:
        self._timed_out = self._timed_out or status is Status.TIMEOUT
        self.close()
        raise RunnerFailed(status, message)

    def _timeout_message(self) -> str:
        return f"killed after the wall-clock limit of {self.budget.total:g} s"

    def _died(self) -> None:
        """The runner ended on its own: reap it, then raise its classified failure."""
        started = time.perf_counter()
        deadline = started + max(min(self.budget.left, 5.0), 0.5)
        while self._status is None and time.perf_counter() < deadline:
            pid, status, usage = os.wait4(self.process.pid, os.WNOHANG)
            if pid:
                self._record(status, usage)
                break
            time.sleep(0.001)
        self.budget.spend(time.perf_counter() - started)
        self.close()
        raise RunnerFailed(*self.classify())

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    def exit_signal(self) -> tuple[int | None, int | None]:
        """(signal, exit code) of the runner: bubblewrap reports a killing signal as 128 + its number."""
        status = self._status or 0
        if os.WIFSIGNALED(status):
            return os.WTERMSIG(status), None
        code = os.WEXITSTATUS(status)
        if self.isolation.available and 128 < code < 160:
            return code - 128, None
        return None, code

    def classify(self) -> tuple[Status, str]:
        """The failure class of a runner that ended without being asked to."""
        sig, code = self.exit_signal()
        return classify_runner_exit(sig, code, fault=self.fault, inputs_base=self.inputs_base,
                                    inputs_size=self.arena.inputs.size, log=self.log_tail(),
                                    maxrss_kb=self._maxrss_kb, cpu_s=self._cpu_s, limits=self.limits)
