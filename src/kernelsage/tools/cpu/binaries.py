"""The trusted binaries around a kernel: the runner, built once from its C source and cached by content,
and sealed memfds that hand exact bytes (the runner, a checked library) to a sandbox."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kernelsage.errors import BackendError
from kernelsage.tools.cpu.abi import HEADER

SOURCE = Path(__file__).with_name("native") / "ks_runner.c"


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_runner(cache_dir: Path) -> tuple[Path, str]:
    """ks_runner for this source and header, built with the system C compiler once and cached by content."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise BackendError("no C compiler (gcc or cc) on PATH to build the kernel runner; install gcc")
    key = hashlib.sha256(SOURCE.read_bytes() + HEADER.read_bytes() + compiler.encode()).hexdigest()[:32]
    entry = cache_dir / "runner" / key
    target, record = entry / "ks_runner", entry / "sha256"
    if target.is_file() and record.is_file() and file_sha256(target) == record.read_text().strip():
        return target, record.read_text().strip()
    entry.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=entry) as scratch:
        built = Path(scratch) / "ks_runner"
        completed = subprocess.run([compiler, "-O2", "-std=gnu11", "-Wall", f"-I{HEADER.parent}", "-o", str(built),
                                    str(SOURCE), "-ldl"], capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise BackendError(f"building the kernel runner failed: {completed.stderr[-2000:]}")
        digest = file_sha256(built)
        os.chmod(built, 0o755)
        os.replace(built, target)
    partial = entry / f".sha256.{os.getpid()}"
    partial.write_text(digest)
    os.replace(partial, record)
    return target, digest


def sealed_memfd(name: str, data: bytes) -> int:
    """A memfd holding `data`, sealed against any change."""
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                | fcntl.F_SEAL_SEAL)
    return fd
