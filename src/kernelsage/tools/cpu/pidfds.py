"""Process handles that cannot be fooled by PID reuse: pidfds of the sandbox's processes, and signals through them."""

from __future__ import annotations

import contextlib
import os
import signal


def child_pidfd(pid: int, parent: int) -> int:
    """A pidfd for `pid` if it is (still) a child of `parent`, else -1."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return -1
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if int(handle.read().rsplit(b")", 1)[1].split()[1]) == parent:
                return fd
    except (OSError, ValueError, IndexError):
        pass
    os.close(fd)
    return -1


def signal_pidfd(pidfd: int, number: int) -> None:
    """Send `number` through a pidfd (nothing when there is none or the process is gone)."""
    if pidfd >= 0:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(pidfd, number)
