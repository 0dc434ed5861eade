"""The CANN toolchain on this host: where it is, which version, which tools, and the environment its tools need.

Everything is read from the environment that CANN's `set_env.sh` exports (ASCEND_HOME_PATH, PATH,
LD_LIBRARY_PATH, ASCEND_OPP_PATH ...) and from the files of the installation; nothing here imports
torch_npu. Where something is missing, `ToolchainProblem` says exactly what and how to fix it.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kernelsage.errors import BackendError
from kernelsage.tools.ascend.layouts import CannLayout, layout_problem, probe_layout

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
# The release name (8.1.RC1) before the inner component version (7.7.0.1.238) that the same files carry:
# version.cfg says `runtime_running_version=[7.7.0.1.238:8.1.RC1]`, version.info `Version=7.7.0.1.238` and
# `version_dir=8.1.RC1`, ascend_toolkit_install.info `version=8.1.RC1` (CANN 8.1.RC1 as installed).
RELEASE_LINES = (re.compile(r"^\s*\w*running_version\s*=\s*\[[^:\]]*:([0-9A-Za-z.\-_]+)\]", re.MULTILINE),
                 re.compile(r"^\s*version_dir\s*=\s*([0-9A-Za-z.\-_]+)", re.MULTILINE),
                 re.compile(r"^\s*version\s*=\s*([0-9A-Za-z.\-_]+)", re.MULTILINE))
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
    layout: CannLayout | None = None  # what the direct route includes and links (`layouts.probe_layout`)

    def describe(self) -> str:
        layout = f", layout {self.layout.name}" if self.layout else ""
        return f"CANN {self.cann_version} at {self.ascend_home}{layout}, {self.bisheng_version or self.bisheng}"


def cann_version(home: Path) -> str:
    """The installation's release (8.1.RC1) from the first version file that names one, else the first
    component version found ('unknown' if no file names any)."""
    texts = []
    for name in VERSION_FILES:
        try:
            texts.append((home / name).read_text(errors="replace"))
        except OSError:
            continue
    for text in texts:
        for pattern in RELEASE_LINES:
            if match := pattern.search(text):
                return match.group(1)
    return next((m.group(1) for m in map(VERSION_LINE.search, texts) if m), "unknown")


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
    # where CANN's own cmake (compiler/, tools/) and upstream's harness (<arch>-linux/) look for it
    bisheng = _which("bisheng", environ, home, "compiler/ccec_compiler/bin", "tools/ccec_compiler/bin",
                     f"{platform.machine()}-linux/ccec_compiler/bin", "bin")
    if not bisheng:
        raise ToolchainProblem(f"CANN at {home} has no bisheng compiler on PATH or in compiler/ccec_compiler/bin: "
                               "install the full toolkit (the `--full` install of Ascend-cann-toolkit) and "
                               f"{SET_ENV_HINT}")
    layout = probe_layout(home)
    if problem := layout_problem(home, layout):
        raise ToolchainProblem(f"{problem}: install the full toolkit (the `--full` install of Ascend-cann-toolkit) "
                               f"and {SET_ENV_HINT}")
    cxx = shutil.which(host_cxx, path=environ.get("PATH", "")) or shutil.which(host_cxx) or ""
    if not cxx:
        raise ToolchainProblem(f"the host C++ compiler {host_cxx!r} is not on PATH; install g++ (it builds the "
                               "Python glue of each candidate)")
    return Toolchain(
        ascend_home=home, bisheng=bisheng, host_cxx=cxx,
        msopgen=_which("msopgen", environ, home, "python/site-packages/bin", "tools/msopgen/bin", "bin"),
        cann_version=cann_version(home), bisheng_version=tool_version(bisheng),
        environment=cann_environment(environ), layout=layout,
    )
