"""A Python installation the sandbox's user cannot reach, shown to the device run anyway: hard links of its
files in a directory the trusted side builds, bound read-only where the installation is.

bubblewrap resolves every path it binds as the sandbox's user (uid 65534 when kernelsage runs as root; even
`--ro-bind-fd` is resolved by path), so a Python under a home that others cannot enter (pyenv or conda under
/root, mode 0700) cannot be bound as it is, and the candidate's device run could not start Python at all.
The mirror holds exactly the installation's files that others may read where they are (a directory others
cannot enter is left out, and a file keeps its own mode: it is the same inode), and the sandbox sees it at
the installation's own path, so the environment's links and recorded paths still hold. Nothing else of
the home is reachable: not its other directories, nor anything above the installation. The standard
library's site-packages is left out unless the interpreter imports from it (a venv does not).

Hard links copy no data (about 0.5 s for a standard library's 8,000 files, once per backend). They need the
mirror on the installation's file system: where no candidate place is (`PLACES`), the backend refuses as
before, naming the fix. The mirror's top directory is the sandbox group's only (root:65534, 0710), so other
local users do not reach root's files through it.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
import weakref
from collections.abc import Sequence

from kernelsage.errors import BackendError

SITE_DIRS = ("site-packages", "dist-packages")
PLACES = (tempfile.gettempdir(), "/var/tmp")


def open_to_others(path: str) -> bool:
    """Readable by others where it is (and, for a directory, searchable)."""
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        return True
    return bool(mode & 0o004) and (not stat.S_ISDIR(mode) or bool(mode & 0o001))


def skipped_site_dir(path: str, imported_from: Sequence[str]) -> bool:
    """A site-packages directory the interpreter does not import from (a venv's base installation's)."""
    if os.path.basename(path) not in SITE_DIRS:
        return False
    return not any(entry == path or entry.startswith(path.rstrip("/") + "/") for entry in imported_from)


def link_tree(source: str, target: str, imported_from: Sequence[str]) -> int:
    """Hard links of `source`'s files under `target` (made here); directories made anew (0755, as the
    sandbox must traverse them), links copied as links, anything others may not read left out. Returns the
    number of entries placed."""
    os.mkdir(target, 0o755)
    placed = 0
    for name in sorted(os.listdir(source)):
        path, there = os.path.join(source, name), os.path.join(target, name)
        if not open_to_others(path) or skipped_site_dir(path, imported_from):
            continue
        if os.path.islink(path):
            os.symlink(os.readlink(path), there)
        elif os.path.isdir(path):
            placed += link_tree(path, there, imported_from)
        elif os.path.isfile(path):
            os.link(path, there)
        else:
            continue
        placed += 1
    os.chmod(target, 0o755)
    return placed


def place_for(path: str, places: Sequence[str] = PLACES) -> str:
    """A directory on `path`'s file system to build its mirror in ('' if none of `places` is)."""
    device = os.stat(path).st_dev
    return next((p for p in places if os.path.isdir(p) and os.stat(p).st_dev == device), "")


def unmirrorable(hidden: Sequence[str], places: Sequence[str] = PLACES) -> str:
    """Why these installations cannot be mirrored for the sandbox ('' if they can): the backend refuses with
    this, and the tests that need a device run skip with it."""
    for path in hidden:
        place = place_for(path, places)
        if not place or not open_to_others(path):
            return (f"the sandboxed device run (uid 65534) cannot read the Python environment at {path} (a "
                    "directory above it is closed to other users) and kernelsage cannot mirror it ("
                    f"{'it is closed to them too' if place else f'no place on its file system among {list(places)}'}"
                    "): use a Python installed where other users can read it (e.g. /usr/bin/python3 or one under "
                    "/opt; a venv made from a Python under /root still runs that Python)")
    return ""


class PythonMirror:
    """The mirrors of one backend, built on first need and removed on close (thread-safe)."""

    def __init__(self, places: Sequence[str] = PLACES) -> None:
        self.places = tuple(places)
        self._lock = threading.Lock()
        self._roots: list[str] = []
        self._built: dict[str, str] = {}
        self._finalizer = weakref.finalize(self, _remove, self._roots)

    def binds(self, hidden: Sequence[str], imported_from: Sequence[str], group: int | None) -> list[tuple[str, str]]:
        """(mirror, installation) for each hidden installation (bind the first read-only at the second), for a
        sandbox whose host group is `group` (None: our own)."""
        with self._lock:
            for path in hidden:
                if path not in self._built:
                    real = [os.path.realpath(p) for p in imported_from if p]
                    self._built[path] = self._build(path, real, group)
            return [(self._built[path], path) for path in hidden]

    def _build(self, path: str, imported_from: Sequence[str], group: int | None) -> str:
        problem = unmirrorable([path], self.places)
        if problem:
            raise BackendError(problem)
        root = tempfile.mkdtemp(prefix="kernelsage-python-", dir=place_for(path, self.places))
        self._roots.append(root)
        if group is not None:  # only the sandbox's group may enter: root's files stay root's
            os.chown(root, -1, group)
        os.chmod(root, 0o710)
        mirror = os.path.join(root, "python")
        try:
            link_tree(path, mirror, imported_from)
        except OSError as exc:
            raise BackendError(f"mirroring the Python environment at {path} for the sandboxed device run "
                               f"failed: {exc}") from exc
        return mirror

    def close(self) -> None:
        self._finalizer()


def _remove(roots: list[str]) -> None:
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)
    roots.clear()
