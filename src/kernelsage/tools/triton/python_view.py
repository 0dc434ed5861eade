"""The Python installation the sandboxed runner needs, shown to it read-only at the paths it has here.

The runner is Python (torch and triton run there), so its sandbox binds the interpreter's prefix and the
virtual environment's, read-only, and nothing else of the project. bubblewrap resolves every path it binds
as the sandbox's host user (uid 65534 when we are root), so a Python installed under a private directory
(pyenv under /root, a home directory of mode 0700) cannot be bound as it is. As root, the judge then bind
mounts such a prefix onto a directory that user can reach, in a mount namespace of its own (nothing changes
on the host, and the mount ends with the judge), and the sandbox binds it from there.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kernelsage.errors import BackendError
from kernelsage.tools.isolation import Isolation, reachable_by_sandbox

CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000


def prefixes() -> list[str]:
    """The interpreter's prefix and the virtual environment's (when it is another), resolved."""
    found: list[str] = []
    for prefix in (sys.base_prefix, sys.prefix):
        real = os.path.realpath(prefix)
        if real not in found:
            found.append(real)
    return found


def unreachable(isolation: Isolation, found: Sequence[str] | None = None) -> list[str]:
    """The prefixes (this Python's, or those `found`) the sandbox's host user cannot reach on its own."""
    return [p for p in (prefixes() if found is None else found) if not reachable_by_sandbox(p, isolation)]


def usable(isolation: Isolation, found: Sequence[str] | None = None) -> str:
    """'' when the runner's Python (this one, or the one whose prefixes are `found`) can be shown to its
    sandbox here, else why not."""
    hidden = unreachable(isolation, found) if isolation.available else []
    if hidden and os.geteuid() != 0:
        return (f"the Python at {', '.join(hidden)} is not readable by the sandbox's user: install Python and the "
                "virtual environment under a directory others may read")
    return ""


def python_binds(isolation: Isolation, found: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(host path, sandbox path) read-only binds that give the sandbox this Python, torch and triton (or the
    Python whose resolved prefixes are `found`: triton-ascend's, say)."""
    if not isolation.available:
        return []
    problem = usable(isolation, found)
    if problem:
        raise BackendError(problem)
    hidden = unreachable(isolation, found)
    return [(_reachable_copy(p) if p in hidden else p, p) for p in (prefixes() if found is None else found)]


@functools.cache
def _reachable_copy(prefix: str) -> str:
    """`prefix` mounted (bind, in this process's own mount namespace) where uid 65534 can reach it; called
    in the judge, whose working directory is its job's."""
    _private_mount_namespace()
    # In the job's directory (removed with it), which with its parent becomes traversable, not listable.
    place = Path(tempfile.mkdtemp(prefix="python-", dir=os.getcwd()))
    os.chmod(place, 0o755)
    for parent in (place.parent, place.parent.parent):
        os.chmod(parent, os.stat(parent).st_mode | 0o111)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(prefix.encode(), str(place).encode(), None, MS_BIND | MS_REC, None) != 0:
        raise BackendError(f"could not show {prefix} to the sandbox (bind mount: "
                           f"{os.strerror(ctypes.get_errno())})")
    return str(place)


@functools.lru_cache(maxsize=1)
def _private_mount_namespace() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise BackendError(f"could not make a private mount namespace for the runner's Python: "
                           f"{os.strerror(ctypes.get_errno())}")
