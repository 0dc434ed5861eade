"""What a worker's child does for the cpu backend: build, verify, profile. The child is trusted (the judge);
untrusted work (the compiler on the candidate's source, the candidate's code) runs in sandboxes it starts.

`prepare` runs in the worker before the fork: it loads (and caches) the task, so each child starts with it, and
for a build it works out (once per compiler) the compiler's view of the system, the only files its sandbox
holds (`compiler_view`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelsage.tasks.model import Task
from kernelsage.tools.cpu import judge
from kernelsage.tools.cpu import profile as profiling
from kernelsage.tools.cpu.build import locale
from kernelsage.tools.cpu.compiler_view import compiler_view, option_flags
from kernelsage.tools.cpu.symbols import forbidden_links, needed_libraries, undefined_symbols
from kernelsage.tools.diagnostics import keep_start
from kernelsage.tools.isolation import (
    Isolation,
    Mount,
    Rlimits,
    popen_options,
    reachable_by_sandbox,
    sandboxed,
)
from kernelsage.tools.judging.arena import sealed_memfd
from kernelsage.tools.judging.tasks import prepare_task

Emit = Callable[[dict[str, Any]], None]
MAX_LIBRARY_BYTES = 256 << 20
LOG_LIMIT = 20000  # characters of compiler output kept: its start (the first errors) and its last lines
TOOL_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C", "TMPDIR": "/tmp"}


def prepare(payload: dict[str, Any]) -> Task | tuple[Mount, ...] | None:
    """Load the job's task in the worker (cached while its file is unchanged); for an isolated build, the
    compiler's view instead (cached per compiler, flags and locale)."""
    if "command" in payload and payload["isolation"]["level"] == "bubblewrap":
        command = payload["command"]
        home = tree_home() if reachable_by_sandbox(tree_home(), Isolation(**payload["isolation"])) else ""
        return compiler_view(command[0], option_flags(command[1:]), tuple(sorted(locale().items())), home)
    return prepare_task(payload)


@functools.lru_cache(maxsize=1)
def tree_home() -> str:
    """Where this worker keeps the compiler's header tree: its own temporary directory (the sandbox's root,
    which the backend lets the sandbox's user traverse, and removes with the worker)."""
    home = tempfile.mkdtemp(prefix="compiler-view-")
    os.chmod(home, 0o755)
    return home


def read_library(path: Path) -> bytes:
    """The built library, refusing anything but a plain file of sane size (the build directory was the
    sandbox's to write: it could hold a symbolic link to a host file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_LIBRARY_BYTES:
            raise OSError(f"{path.name} is not a regular file of at most {MAX_LIBRARY_BYTES >> 20} MiB")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _tool_env(isolation: Isolation, workdir: Path) -> dict[str, str]:
    env = {**TOOL_ENV, **locale()}
    return env if isolation.available else {**env, "TMPDIR": str(workdir)}


def build(payload: dict[str, Any], context: tuple[Mount, ...] | None, emit: Emit) -> None:
    """Compile the sources already in ./build inside the sandbox, which holds only the compiler's view of the
    system (`context`, from `prepare`), then inspect what the library links."""
    emit({"kind": "phase", "phase": "compile"})
    isolation = Isolation(**payload["isolation"])
    limits = payload["limits"]
    workdir = Path.cwd()
    build_dir = workdir / "build"
    rlimits = Rlimits(address_space=int(limits["memory_bytes"]), cpu_s=int(limits["cpu_s"]),
                      file_bytes=int(limits["file_bytes"]), processes=512)
    env = _tool_env(isolation, workdir)
    command = sandboxed(isolation, payload["command"], env=env, limits=rlimits,
                        rw_binds=[(str(build_dir), "/build")], chdir="/build", tmp_bytes=1 << 30,
                        system_mounts=context)
    started = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False,
                                   timeout=float(limits["wall_s"]), cwd=build_dir, env=env,
                                   **popen_options(isolation))
    except subprocess.TimeoutExpired:
        emit({"kind": "result", "data": {"timeout": True, "seconds": time.perf_counter() - started}})
        return
    data: dict[str, Any] = {"returncode": completed.returncode, "seconds": time.perf_counter() - started,
                            "log": keep_start(completed.stdout + completed.stderr, LOG_LIMIT)}
    if completed.returncode == 0:
        emit({"kind": "phase", "phase": "inspect"})
        try:
            library = read_library(build_dir / "kernel.so")
        except OSError as exc:
            data.update(returncode=1, log=data["log"] + f"\nthe build produced no usable library: {exc}")
        else:
            data["sha256"] = hashlib.sha256(library).hexdigest()
            data["forbidden"], data["inspect_error"] = inspect(library, isolation, workdir)
    emit({"kind": "result", "data": data})


def inspect(library: bytes, isolation: Isolation, workdir: Path) -> tuple[list[tuple[str, str]], str]:
    """What the library links against that it may not (binutils reads the untrusted file in a sandbox)."""
    fd = sealed_memfd("kernelsage-inspect", library)
    path = f"/proc/self/fd/{fd}"
    script = f"nm -D --undefined-only {path} && echo '--- needed' && readelf -d {path}"
    command = sandboxed(isolation, ["/bin/sh", "-c", script], env=_tool_env(isolation, workdir),
                        limits=Rlimits(address_space=2 << 30, cpu_s=30, file_bytes=1 << 20, processes=512))
    try:
        completed = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False,
                                   timeout=60, pass_fds=(fd,), env=_tool_env(isolation, workdir),
                                   **popen_options(isolation))
    except subprocess.TimeoutExpired:
        return [], "inspecting the library timed out"
    finally:
        os.close(fd)
    if completed.returncode != 0 or "--- needed" not in completed.stdout:
        return [], f"the library could not be inspected: {completed.stderr.strip()[-500:]}"
    symbols, needed = completed.stdout.split("--- needed", 1)
    return forbidden_links(undefined_symbols(symbols), needed_libraries(needed)), ""


def verify(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    judge.verify(payload, task, emit)


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    profiling.profile(payload, task, emit)
