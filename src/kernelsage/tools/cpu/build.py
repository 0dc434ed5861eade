"""Building a CPU candidate: the compiler command, the cache key, and the build cache directory.

The build itself runs isolated (`kernelsage.tools.cpu.jobs.build`): the compiler sees, read-only, only the
toolchain (`compiler_view`: its programs and libraries, the C and C++ standard library headers; no other
library's headers, no /usr/share, nothing of /etc) and, writable, only the job's build directory, so
`#include "/etc/passwd"` or `<python3.11/Python.h>` and `.incbin "/usr/share/..."` find nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from kernelsage.errors import BackendError
from kernelsage.tools.cpu.abi import ENTRY_POINT, HEADER
from kernelsage.tools.cpu.symbols import POLICY_VERSION

LIBRARY_NAME = "kernel.so"
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")
HEADER_SUFFIXES = (".h", ".hpp", ".hh")
MAX_COMPILER_ERRORS = 20  # the compiler stops after this many errors: the first ones are what matters
DEFAULT_FLAGS = (
    "-std=c++17", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-Wall",
    # Fail at build time, not at load time, when ks_kernel is missing or a symbol is undefined.
    f"-Wl,--require-defined={ENTRY_POINT}", "-Wl,-z,defs",
)


LOCALE = ("LANG", "LC_ALL", "LC_CTYPE")  # the user's: compiler messages read as they expect


def locale() -> dict[str, str]:
    """The locale the compiler runs with (it decides the language and quotes of its messages)."""
    return {name: os.environ[name] for name in LOCALE if os.environ.get(name)}


@functools.lru_cache(maxsize=8)
def compiler_identity(compiler: str) -> str:
    """The compiler's version banner (part of the cache key: a new compiler means new builds)."""
    path = shutil.which(compiler)
    if path is None:
        raise BackendError(f"the C++ compiler {compiler!r} is not on PATH; install g++ or pass compiler=...")
    completed = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return f"{path}\n{completed.stdout.splitlines()[0] if completed.stdout else ''}"


def cache_key(files: dict[str, str], flags: tuple[str, ...], compiler: str) -> str:
    material = json.dumps({"files": sorted(files.items()), "flags": [*flags, error_limit_flag(compiler)],
                           "compiler": compiler_identity(compiler), "header": HEADER.read_text(),
                           "symbol_policy": POLICY_VERSION, "locale": locale()})
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def check_file_names(files: dict[str, str]) -> str:
    """Why a candidate's file set cannot be built, or '' (one C++ source, plain names)."""
    if not files:
        return "the candidate has no files"
    for name in files:
        if "/" in name or "\\" in name or name.startswith(".") or not name.endswith(SOURCE_SUFFIXES
                                                                                   + HEADER_SUFFIXES):
            return (f"file name {name!r} is not allowed: use plain names ending in "
                    f"{', '.join(SOURCE_SUFFIXES + HEADER_SUFFIXES)}")
    sources = [name for name in files if name.endswith(SOURCE_SUFFIXES)]
    if len(sources) != 1:
        return f"the cpu backend builds exactly one C++ source file; got {len(sources)}: {sources}"
    return ""


def error_limit_flag(compiler: str) -> str:
    """The flag that stops the compiler after MAX_COMPILER_ERRORS errors (clang spells it differently)."""
    name = Path(compiler).name
    return f"-ferror-limit={MAX_COMPILER_ERRORS}" if "clang" in name else f"-fmax-errors={MAX_COMPILER_ERRORS}"


def compile_command(compiler: str, flags: tuple[str, ...], source: str) -> list[str]:
    return [compiler, *flags, error_limit_flag(compiler), "-I.", "-o", LIBRARY_NAME, source]
