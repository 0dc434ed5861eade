"""Isolation of untrusted work (compiling and running candidates) with bubblewrap.

`detect()` probes once whether bubblewrap works here; `sandboxed(...)` builds the command line that runs a
program isolated: all namespaces unshared (user, pid, net, ipc, uts, cgroup; no nested user namespaces),
uid/gid 65534 with every capability dropped, a new session, an empty environment plus an explicit one,
read-only /usr (and the /bin, /lib... links to it; or, for a program that needs nothing but its shared
libraries, only those files: `system_files`; or exactly the mounts a caller lists, such as the compiler's
view: `system_mounts`), its own /proc and a minimal /dev, a small private /tmp, and
only the binds the caller names: never /etc, /root, the home, the project or the build cache. Resource
limits (address space, CPU time, file size, processes, no core files) are set by util-linux's `prlimit`
before bubblewrap starts, so every process of the sandbox inherits them. As root, bubblewrap itself runs as
the unprivileged user 65534, so the sandbox is not root on the host even through the user namespace.

Where bubblewrap is missing or does not work, the backends refuse untrusted code (`require`) unless the
caller passes the loudly named escape hatch (`unsafe_no_isolation`, `KERNELSAGE_UNSAFE_NO_ISOLATION=1`).
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelsage.errors import BackendError

UNSAFE_ENV = "KERNELSAGE_UNSAFE_NO_ISOLATION"
SANDBOX_ID = 65534  # "nobody": the user and group inside the sandbox, and on the host when we are root
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
PROBE_TIMEOUT_S = 20.0
MIN_VERSION = (0, 5, 0)  # --size, --perms
DISABLE_USERNS_VERSION = (0, 8, 0)
# One piece of a sandbox's file system: ("ro-bind", host path, sandbox path) or ("symlink", link text, sandbox
# path). Plain data, so a view computed by the worker reaches the job that uses it as it is.
Mount = tuple[str, str, str]
MOUNT_FLAGS = {"ro-bind": "--ro-bind", "symlink": "--symlink"}


def version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


class IsolationUnavailableError(BackendError):
    """Untrusted code would run without isolation; kernelsage refuses unless explicitly told otherwise."""


@dataclass(frozen=True)
class Isolation:
    """What isolation untrusted work gets on this machine."""

    level: str  # "bubblewrap" | "none"
    bwrap: str = ""
    version: str = ""
    user: int | None = None  # the host uid bubblewrap runs as (65534 when we are root), None: our own
    problem: str = ""  # why the level is "none"

    @property
    def available(self) -> bool:
        return self.level == "bubblewrap"

    def describe(self) -> str:
        if not self.available:
            return (f"none: {self.problem}. Candidates would compile and run with this user's rights, seeing "
                    "its files, processes and network; kernelsage refuses them unless the unsafe flag is given")
        who = "uid 65534 on the host" if self.user is not None else "this user's uid on the host"
        return (f"bubblewrap {self.version}: compiler and kernels run in their own user, pid, mount, network, "
                f"ipc, uts and cgroup namespaces as {who}, without capabilities, with read-only system "
                "directories and nothing of /etc, the home or the project; kernels additionally run under a "
                "seccomp allowlist with resource limits")


def _probe(candidate: Isolation) -> str:
    """'' when a trivial sandbox runs (limits set by prlimit, as every real one), else what went wrong."""
    command = sandboxed(candidate, ["/usr/bin/true"], env={}, limits=Rlimits(cpu_s=10, processes=512))
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False,
                                   **popen_options(candidate))
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"
    if completed.returncode != 0:
        return (completed.stderr.strip() or f"exit code {completed.returncode}")[:300]
    return ""


@functools.lru_cache(maxsize=1)
def detect() -> Isolation:
    """Probe bubblewrap once per process (as uid 65534 when we are root, else as ourselves)."""
    bwrap = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else "")
    if not bwrap:
        return Isolation("none", problem="bubblewrap (bwrap) is not installed")
    completed = subprocess.run([bwrap, "--version"], capture_output=True, text=True, check=False)
    version = completed.stdout.split()[-1] if completed.stdout.split() else "0"
    if version_tuple(version) < MIN_VERSION:
        return Isolation("none", bwrap, version, problem=f"bubblewrap {version} is older than "
                                                         f"{'.'.join(map(str, MIN_VERSION))}")
    candidates = [SANDBOX_ID, None] if os.geteuid() == 0 else [None]
    problems = []
    for user in candidates:
        candidate = Isolation("bubblewrap", bwrap, version, user=user)
        problem = _probe(candidate)
        if not problem:
            return candidate
        problems.append(problem)
    return Isolation("none", bwrap, version, problem=f"{bwrap} is installed but does not work here: "
                                                      f"{problems[-1]} (unprivileged user namespaces may be "
                                                      "disabled: sysctl kernel.unprivileged_userns_clone / "
                                                      "user.max_user_namespaces)")


def unsafe_requested(explicit: bool = False) -> bool:
    """The escape hatch: an explicit flag, or KERNELSAGE_UNSAFE_NO_ISOLATION=1."""
    return explicit or os.environ.get(UNSAFE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def require(*, unsafe: bool, isolation: Isolation | None = None) -> Isolation:
    """The isolation to use (detected unless given); refuses (raises) when there is none and the unsafe flag
    was not given."""
    isolation = isolation or detect()
    if isolation.available or unsafe:
        return isolation
    raise IsolationUnavailableError(
        f"kernelsage will not compile or run candidate code without isolation: {isolation.problem}. Install "
        "bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; scripts/install.sh does it as root) and check "
        "with `kernelsage doctor`. To run untrusted code unisolated anyway (never with a model you do not "
        f"control), pass --unsafe-no-isolation to `kernelsage check`, set {UNSAFE_ENV}=1, or use "
        "CpuBackend(unsafe_no_isolation=True)")


@dataclass(frozen=True)
class Rlimits:
    """Resource limits of a sandboxed program (None: not set)."""

    address_space: int | None = None
    cpu_s: int | None = None
    file_bytes: int | None = None
    processes: int | None = None  # counts the host user's processes; not enforced for root


def limits_prefix(limits: Rlimits | None) -> list[str]:
    """`prlimit ... --`, which sets the limits and then executes the rest of the command line."""
    if limits is None:
        return []
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    args = [prlimit, "--core=0"]
    if limits.address_space is not None:
        args.append(f"--as={int(limits.address_space)}")
    if limits.cpu_s is not None:
        cpu = max(1, int(limits.cpu_s))
        args.append(f"--cpu={cpu}:{cpu + 2}")  # SIGXCPU at the soft limit, SIGKILL two seconds later
    if limits.file_bytes is not None:
        args.append(f"--fsize={int(limits.file_bytes)}")
    if limits.processes is not None:
        args.append(f"--nproc={int(limits.processes)}")
    return [*args, "--"]


def _system_mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_LINKS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def link_mounts() -> list[str]:
    """The /bin, /lib... links to /usr of a merged-/usr system, as links (what they lead to is bound apart)."""
    args = []
    for name in SYSTEM_LINKS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
    return args


def runtime_mounts(files: Sequence[str]) -> list[str]:
    """Only these files of the system (each bound read-only where the dynamic loader looks for it: its
    directory resolved, its own name kept), plus the /bin, /lib... links: nothing else of /usr exists."""
    args = link_mounts()
    for file in files:
        where = Path(os.path.realpath(Path(file).parent)) / Path(file).name
        args += ["--ro-bind", os.path.realpath(file), str(where)]
    return args


def mount_args(mounts: Sequence[Sequence[str]]) -> list[str]:
    """bubblewrap's arguments for these mounts, in order, after the /bin, /lib... links; a target named twice
    is mounted once, as first named (bubblewrap refuses a second symlink on a path)."""
    args, seen = link_mounts(), set()
    for kind, source, target in mounts:
        if target not in seen:
            seen.add(target)
            args += [MOUNT_FLAGS[kind], source, target]
    return args


def _system_view(system_files: Sequence[str] | None, system_mounts: Sequence[Sequence[str]] | None) -> list[str]:
    if system_mounts is not None:
        return mount_args(system_mounts)
    return _system_mounts() if system_files is None else runtime_mounts(system_files)


def sandboxed(isolation: Isolation, command: Sequence[str], *, env: Mapping[str, str],
              limits: Rlimits | None = None, ro_binds: Sequence[tuple[str, str]] = (),
              rw_binds: Sequence[tuple[str, str]] = (), data_files: Sequence[tuple[int, str, int]] = (),
              chdir: str = "/", tmp_bytes: int = 64 << 20, info_fd: int | None = None,
              system_files: Sequence[str] | None = None,
              system_mounts: Sequence[Sequence[str]] | None = None, extra_args: Sequence[str] = ()) -> list[str]:
    """The command line that runs `command` isolated (or merely limited, at level "none").

    `ro_binds` / `rw_binds` are (host path, sandbox path); `data_files` are (fd, sandbox path, mode): bubblewrap
    copies the fd's contents into a read-only file. Pass the fds with `pass_fds` and `popen_options`.
    `system_files`, when given, replaces the read-only system directories by these files alone (see
    `runtime_mounts`): a program that needs only its shared libraries finds nothing else to open or load.
    `system_mounts`, when given, replaces them by exactly these `Mount`s (plus the /bin, /lib... links).
    `extra_args` are further bubblewrap options (a device node for a GPU runner: `--dev-bind`).
    """
    if not isolation.available:
        return [*limits_prefix(limits), *command]
    nested = ["--disable-userns"] if version_tuple(isolation.version) >= DISABLE_USERNS_VERSION else []
    args = [isolation.bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", *nested, "--uid", str(SANDBOX_ID), "--gid", str(SANDBOX_ID),
            "--hostname", "kernelsage", "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL",
            *_system_view(system_files, system_mounts), "--proc", "/proc", "--dev", "/dev",
            "--size", str(int(tmp_bytes)), "--tmpfs", "/tmp"]
    for source, target in ro_binds:
        args += ["--ro-bind", source, target]
    for source, target in rw_binds:
        args += ["--bind", source, target]
    for fd, target, mode in data_files:
        args += ["--perms", f"{mode:04o}", "--ro-bind-data", str(fd), target]
    args += list(extra_args)
    for name, value in env.items():
        args += ["--setenv", name, value]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    return [*limits_prefix(limits), *args, "--chdir", chdir, "--", *command]


def popen_options(isolation: Isolation) -> dict[str, Any]:
    """subprocess options that start the sandbox as its host user (uid/gid 65534 when we are root)."""
    if not isolation.available or isolation.user is None:
        return {}
    return {"user": isolation.user, "group": isolation.user, "extra_groups": []}


def reachable_by_others(path: str) -> bool:
    """Whether a user with no rights of its own (the sandbox's uid 65534) can reach and read `path`: every
    directory above it searchable by others, the path itself readable by others. bubblewrap resolves every
    path it binds as that user, so nothing else can be shown to a sandbox that runs as uid 65534."""
    real = Path(os.path.realpath(path))
    try:
        if any(not os.stat(parent).st_mode & 0o001 for parent in real.parents):
            return False
        mode = os.stat(real).st_mode
    except OSError:
        return False
    return bool(mode & 0o004) and (not stat.S_ISDIR(mode) or bool(mode & 0o001))


def reachable_by_sandbox(path: str, isolation: Isolation) -> bool:
    """Whether the sandbox's host user can reach `path` (always, when it runs as ourselves)."""
    return isolation.user is None or reachable_by_others(path)


def give_to_sandbox(path: Path, isolation: Isolation, *, within: Path) -> None:
    """Let the sandbox's host user write `path` (a directory we made for it), and traverse (not list) the
    directories from `within` down to it."""
    if not isolation.available or isolation.user is None:
        return
    os.chown(path, isolation.user, isolation.user)
    for parent in [*path.parents][: len(path.parents) - len(within.parents)]:
        os.chmod(parent, os.stat(parent).st_mode | 0o111)
