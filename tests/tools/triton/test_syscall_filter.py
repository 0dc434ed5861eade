"""The Python runner's seccomp filter (tools/triton/sandbox/syscall_filter.py), alone: its system call numbers
against the kernel's headers, and what it refuses and allows in a process of its own (the attacks in
test_triton_attacks.py run it in the sandbox)."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.tools.triton.sandbox.syscall_filter import SYSCALLS, build

HEADERS = {0: Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"), 1: Path("/usr/include/asm-generic/unistd.h")}
pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64") or sys.platform != "linux",
                                reason="the filter is defined for Linux on x86_64 and aarch64")


@pytest.mark.parametrize("column", [0, 1], ids=["x86_64", "aarch64"])
def test_the_system_call_numbers_are_the_kernels(column: int) -> None:
    header = HEADERS[column]
    if not header.exists():
        pytest.skip(f"{header} is not installed")
    defined = {m[0]: int(m[1]) for m in re.findall(r"#define __NR3?2?6?4?_(\w+)\s+(\d+)\b", header.read_text())}
    wrong = {name: (numbers[column], defined.get(name)) for name, numbers in SYSCALLS.items()
             if numbers[column] != defined.get(name)}
    assert wrong == {}


def test_the_program_is_well_formed() -> None:
    for device in ("interpret", "cuda"):
        for machine in ("x86_64", "aarch64"):
            code = build(device, 2, machine)
            assert len(code) % 8 == 0 and 0 < len(code) // 8 < 4096
    with pytest.raises(OSError, match="x86_64 and aarch64 only"):
        build("interpret", 2, "riscv64")


PROBE = r'''
import ctypes, errno, json, os, platform, signal, socket, sys, threading
sys.path.insert(0, sys.argv[2])
from syscall_filter import install, SYSCALLS
column = 0 if platform.machine() == "x86_64" else 1
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def outcome(call):
    try:
        call()
        return "ok"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))

def raw(name, *args):
    def call():
        if libc.syscall(ctypes.c_long(SYSCALLS[name][column]), *(ctypes.c_long(a) for a in args)) < 0:
            raise OSError(ctypes.get_errno(), name)
    return call

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

def thread():
    worker = threading.Thread(target=lambda: None)
    worker.start()
    worker.join()

install(sys.argv[1])
print(json.dumps({
    "thread": outcome(thread), "fork": outcome(fork), "socket": outcome(lambda: socket.socket().close()),
    "kill_parent": outcome(lambda: os.kill(os.getppid(), 0)),
    "signal_self": outcome(lambda: signal.pthread_kill(threading.get_ident(), 0)),
    "unshare": outcome(raw("unshare", 0x10000000)), "ptrace": outcome(raw("ptrace", 16, os.getppid(), 0, 0)),
    "clone3": outcome(raw("clone3", 0, 0)), "seccomp": outcome(raw("seccomp", 1, 0, 0)),
    "prctl_seccomp": outcome(raw("prctl", 22, 2, 0)), "open": outcome(lambda: open(sys.argv[3]).close()),
    "mmap": outcome(lambda: __import__("mmap").mmap(-1, 1 << 20).close()),
}))
'''


def run_probe(device: str) -> dict[str, str]:
    folder = Path(__file__).resolve().parents[3] / "src" / "kernelsage" / "tools" / "triton" / "sandbox"
    completed = subprocess.run([sys.executable, "-I", "-c", PROBE, device, str(folder), __file__],
                               capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout)


def test_on_the_interpreter_nothing_starts_a_process_or_reaches_out() -> None:
    seen = run_probe("interpret")
    assert seen == {"thread": "ok", "fork": "EPERM", "socket": "EPERM", "kill_parent": "EPERM", "signal_self": "ok",
                    "unshare": "EPERM", "ptrace": "EPERM", "clone3": "ENOSYS", "seccomp": "EPERM",
                    "prctl_seccomp": "EPERM", "open": "ok", "mmap": "ok"}


def test_on_a_gpu_triton_may_run_its_assembler_but_nothing_else_changes() -> None:
    seen = run_probe("cuda")
    assert seen["fork"] == "ok" and seen["thread"] == "ok"
    assert {seen[name] for name in ("socket", "kill_parent", "unshare", "ptrace", "seccomp", "prctl_seccomp")} == {
        "EPERM"}
