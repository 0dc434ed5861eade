"""The CANN toolchain on this host: where it is, which version, which tools, and the environment its tools need.

Everything is read from the environment that CANN's `set_env.sh` exports (ASCEND_HOME_PATH, PATH,
LD_LIBRARY_PATH, ASCEND_OPP_PATH ...) and from the files of the installation; nothing here imports
torch_npu. Where something is missing, `ToolchainProblem` says exactly what and how to fix it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernelsage.errors import BackendError

SET_ENV_HINT = ("install the CANN toolkit and run `source <install dir>/ascend-toolkit/set_env.sh` "
                "(default /usr/local/Ascend/ascend-toolkit/set_env.sh) in the shell that starts kernelsage")
# The variables CANN's set_env.sh sets that the compiler and the runtime read; passed on explicitly because
# the sandbox worker starts from a scrubbed environment.
CANN_VARIABLES = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME",
                  "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH", "ASCEND_CUSTOM_OPP_PATH", "TOOLCHAIN_HOME",
                  "ASCEND_AUTOML_PATH", "ASCEND_SLOG_PRINT_TO_STDOUT", "ASCEND_GLOBAL_LOG_LEVEL")
# Files of an installation that name its version, newest layout first.
VERSION_FILES = ("version.cfg", "compiler/version.info", "runtime/version.info",
                 "x86_64-linux/ascend_toolkit_install.info", "aarch64-linux/ascend_toolkit_install.info")
VERSION_LINE = re.compile(r"^\s*(?:version|Version|runtime_running_version)\s*=\s*\[?([0-9A-Za-z.\-_]+)", re.MULTILINE)


class ToolchainProblem(BackendError):
    """The Ascend toolchain is missing or incomplete on this host (the message names the part and the fix)."""


@dataclass(frozen=True)
class Toolchain:
    """The tools a build uses (absolute paths) and the CANN environment they run in."""

    ascend_home: Path
    bisheng: str
    host_cxx: str
    msopgen: str = ""
    cann_version: str = "unknown"
    bisheng_version: str = ""
    environment: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"CANN {self.cann_version} at {self.ascend_home}, {self.bisheng_version or self.bisheng}"


def cann_version(home: Path) -> str:
    """The installation's version from the first version file that names one ('unknown' if none does)."""
    for name in VERSION_FILES:
        try:
            match = VERSION_LINE.search((home / name).read_text(errors="replace"))
        except OSError:
            continue
        if match:
            return match.group(1)
    return "unknown"


def tool_version(path: str) -> str:
    """The first line of `<tool> --version` ('' when it does not answer)."""
    try:
        completed = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = (completed.stdout or completed.stderr).strip().splitlines()
    return lines[0].strip() if lines else ""


def cann_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The CANN variables of `environ` (what set_env.sh exported) to hand to builds and device runs."""
    return {name: environ[name] for name in CANN_VARIABLES if environ.get(name)}


def _which(name: str, environ: Mapping[str, str], home: Path, *subdirs: str) -> str:
    found = shutil.which(name, path=environ.get("PATH", ""))
    if found:
        return found
    for sub in subdirs:
        candidate = home / sub / name
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return ""


def detect_toolchain(environ: Mapping[str, str] | None = None, *, host_cxx: str = "g++") -> Toolchain:
    """The toolchain the environment points to; raises ToolchainProblem naming what is missing and the fix."""
    environ = os.environ if environ is None else environ
    home_text = environ.get("ASCEND_HOME_PATH") or environ.get("ASCEND_TOOLKIT_HOME")
    if not home_text:
        raise ToolchainProblem(f"the ascend backend needs the CANN toolkit, but ASCEND_HOME_PATH is not set: "
                               f"{SET_ENV_HINT}")
    home = Path(home_text)
    if not home.is_dir():
        raise ToolchainProblem(f"ASCEND_HOME_PATH={home} is not a directory: {SET_ENV_HINT}")
    bisheng = _which("bisheng", environ, home, "compiler/ccec_compiler/bin", "bin")
    if not bisheng:
        raise ToolchainProblem(f"CANN at {home} has no bisheng compiler on PATH or in compiler/ccec_compiler/bin: "
                               "install the full toolkit (the `--full` install of Ascend-cann-toolkit) and "
                               f"{SET_ENV_HINT}")
    cxx = shutil.which(host_cxx, path=environ.get("PATH", "")) or shutil.which(host_cxx) or ""
    if not cxx:
        raise ToolchainProblem(f"the host C++ compiler {host_cxx!r} is not on PATH; install g++ (it builds the "
                               "Python glue of each candidate)")
    return Toolchain(
        ascend_home=home, bisheng=bisheng, host_cxx=cxx,
        msopgen=_which("msopgen", environ, home, "python/site-packages/bin", "tools/msopgen/bin", "bin"),
        cann_version=cann_version(home), bisheng_version=tool_version(bisheng),
        environment=cann_environment(environ),
    )
