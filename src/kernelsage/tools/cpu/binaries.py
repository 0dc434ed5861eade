"""The trusted binaries around a kernel: the runner, built once from its C source and cached by content,
the system files it may see (its loader and the C/C++/OpenMP runtime libraries, nothing else), and sealed
memfds that hand exact bytes (the runner, a checked library) to a sandbox."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from kernelsage.errors import BackendError
from kernelsage.files import write_atomically
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
    write_atomically(record, digest)
    return target, digest


# The shared libraries a kernel may link (tools/cpu/symbols.ALLOWED_LIBRARIES) and what they need themselves.
RUNTIME_SONAMES = ("libc.so.6", "libm.so.6", "libmvec.so.1", "libgomp.so.1", "libstdc++.so.6", "libgcc_s.so.1",
                   "libpthread.so.0", "libdl.so.2", "librt.so.1")


def interpreter(executable: bytes) -> str:
    """The PT_INTERP path of a 64-bit ELF executable ('' if it has none)."""
    if executable[:4] != b"\x7fELF" or executable[4] != 2:
        return ""
    endian = "<" if executable[5] == 1 else ">"
    phoff, = struct.unpack_from(f"{endian}Q", executable, 0x20)
    phentsize, phnum = struct.unpack_from(f"{endian}HH", executable, 0x36)
    for k in range(phnum):
        kind, = struct.unpack_from(f"{endian}I", executable, phoff + k * phentsize)
        if kind == 3:  # PT_INTERP
            offset, = struct.unpack_from(f"{endian}Q", executable, phoff + k * phentsize + 8)
            size, = struct.unpack_from(f"{endian}Q", executable, phoff + k * phentsize + 32)
            return executable[offset:offset + size].rstrip(b"\0").decode()
    return ""


@functools.lru_cache(maxsize=4)
def runtime_files(loader: str) -> tuple[str, ...]:
    """The runner's loader and the runtime libraries, where this system's C compiler finds them."""
    compiler = shutil.which("gcc") or shutil.which("cc") or "gcc"
    files = [loader] if loader else []
    for soname in RUNTIME_SONAMES:
        completed = subprocess.run([compiler, f"-print-file-name={soname}"], capture_output=True, text=True,
                                   check=False)
        path = completed.stdout.strip()
        if completed.returncode == 0 and os.path.isabs(path) and os.path.exists(path):
            files.append(os.path.normpath(path))
    return tuple(files)
