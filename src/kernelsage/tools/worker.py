"""The sandbox worker: reads jobs (JSON lines) on stdin, runs each in a forked, limited child, answers on stdout.

Run as `python -m kernelsage.tools.worker` by `kernelsage.tools.sandbox.Sandbox`; not a public command.
Handlers are `module:function` names; a module may define `prepare(payload)`, run here in the worker before
forking (e.g. to load and cache the task), whose result the child receives. The worker never runs candidate
code itself and never runs torch operators, so every child starts from a clean, single-threaded state.
A child dies with the worker (PR_SET_PDEATHSIG), and the worker kills a child's whole process group when
its wall-clock limit (the candidate's plus the harness's) passes, whatever the child does to its pipes.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
STDERR_TAIL_BYTES = 4000


def _resolve(handler: str) -> tuple[Any, Callable[..., Any]]:
    module_name, _, function_name = handler.partition(":")
    module = importlib.import_module(module_name)
    return module, getattr(module, function_name)


def _rss_kb() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _address_space_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _isolate_network() -> bool:
    """Move into a new, empty network namespace (as root directly, else via a user namespace)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(CLONE_NEWNET) == 0 or libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0


def _set_limit(which: int, value: int) -> None:
    _soft, hard = resource.getrlimit(which)
    ceiling = hard if hard != resource.RLIM_INFINITY else value
    resource.setrlimit(which, (min(value, ceiling), hard))


def _die_with(parent: int) -> None:
    """Be killed when the worker dies (and do not start at all if it already has)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _enter_sandbox(workdir: str, limits: dict[str, Any]) -> bool:
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        target = os.open(os.path.join(workdir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(workdir)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH",
                                                          "VIRTUAL_ENV", "TZ", "MKL_NUM_THREADS")
            or k.startswith(("OMP_", "GOMP_"))}
    os.environ.clear()
    os.environ.update(keep, HOME=workdir, TMPDIR=workdir)
    network_isolated = _isolate_network() if limits["isolate_network"] else False
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_FSIZE, int(limits["file_bytes"]))
    cpu = max(1, int(limits["cpu_s"]))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
    _set_limit(resource.RLIMIT_AS, _address_space_bytes() + int(limits.get("harness_memory_bytes",
                                                                           limits["memory_bytes"])))
    return network_isolated


def _child(job: dict[str, Any], context: Any, write_fd: int) -> None:
    def emit(event: dict[str, Any]) -> None:
        data = (json.dumps(event) + "\n").encode()
        while data:
            data = data[os.write(write_fd, data):]

    try:
        isolated = _enter_sandbox(job["workdir"], job["limits"])
        emit({"kind": "started", "rss_kb": _rss_kb(), "network_isolated": isolated})
        _, function = _resolve(job["handler"])
        function(job["payload"], context, emit)
        code = 0
    except MemoryError:
        emit({"kind": "error", "type": "MemoryError", "message": "out of memory"})
        code = 3
    except BaseException as exc:
        traceback.print_exc()
        emit({"kind": "error", "type": type(exc).__name__, "message": str(exc)[:2000],
              "harness": bool(getattr(exc, "harness", False))})
        code = 1
    sys.stderr.flush()
    os._exit(code)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - STDERR_TAIL_BYTES))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _wait_for(pid: int, read_fd: int, wall_s: float) -> tuple[bytes, bool]:
    """Collect the child's events until it exits or the wall-clock limit passes (then kill its session)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + wall_s
    pidfd = os.pidfd_open(pid)
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_fd, pidfd], [], [], remaining)
            if read_fd in ready:
                data = os.read(read_fd, 1 << 16)
                if data:
                    chunks.append(data)
                    continue
                ready = [pidfd]  # EOF: the child closed its end; it is exiting
            if pidfd in ready:
                break
    finally:
        os.close(pidfd)
    if timed_out:
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            with contextlib.suppress(ProcessLookupError):
                target()
    os.set_blocking(read_fd, False)
    try:
        while data := os.read(read_fd, 1 << 16):
            chunks.append(data)
    except BlockingIOError:
        pass
    return b"".join(chunks), timed_out


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    reply: dict[str, Any] = {"id": job["id"]}
    try:
        module, _ = _resolve(job["handler"])
        prepare = getattr(module, "prepare", None)
        context = prepare(job["payload"]) if prepare else None
    except Exception as exc:
        reply["prepare_error"] = f"{type(exc).__name__}: {exc}"
        return reply
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.perf_counter()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        _die_with(parent)
        os.close(read_fd)
        _child(job, context, write_fd)
    os.close(write_fd)
    limits = job["limits"]
    try:
        raw, timed_out = _wait_for(pid, read_fd, float(limits["wall_s"]) + float(limits.get("harness_wall_s", 0)))
    finally:
        os.close(read_fd)
    _, status, usage = os.wait4(pid, 0)
    # A child killed by the clock leaves its session's other processes (a compiler, say): end them too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    events = []
    for line in raw.decode(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    started_event = next((e for e in events if e.get("kind") == "started"), {})
    reply.update(
        exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        signal=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        timed_out=timed_out, wall_s=time.perf_counter() - started, events=events,
        stderr_tail=_tail(os.path.join(job["workdir"], "stderr.txt")), max_rss_kb=usage.ru_maxrss,
        network_isolated=bool(started_event.get("network_isolated", False)),
    )
    return reply


def main() -> None:
    for name in filter(None, os.environ.get("KERNELSAGE_PRELOAD", "").split(",")):
        importlib.import_module(name)
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            reply = run_job(job)
        except Exception as exc:  # the worker itself must survive whatever a job does
            reply = {"id": job.get("id"), "prepare_error": f"worker: {type(exc).__name__}: {exc}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def probe(payload: dict[str, Any], context: Any, emit: Callable[[dict[str, Any]], None]) -> None:
    """Report what a sandboxed child sees (a self-check of the sandbox; no candidate code involved)."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", int(payload.get("port", 9))), timeout=1):
            network = "connected"
    except OSError as exc:
        network = f"{type(exc).__name__}: {exc}"
    emit({"kind": "result", "data": {
        "env": sorted(os.environ), "cwd": os.getcwd(), "network": network,
        "address_space_limit": resource.getrlimit(resource.RLIMIT_AS)[0],
        "cpu_limit": resource.getrlimit(resource.RLIMIT_CPU)[0],
    }})


if __name__ == "__main__":
    main()
