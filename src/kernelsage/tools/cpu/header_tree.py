"""The C library's headers as one directory per shared include directory, so the compiler's sandbox shows
them with one mount instead of one per header.

bubblewrap re-reads the mount table for every read-only bind, so a mount per glibc header (about 140 on
Debian) tripled the sandbox's start (30 -> 107 ms). Instead the trusted side builds, once per worker, a
directory holding only the allowed entries of /usr/include (hard links to the host's files, or copies where
the file system refuses a link) and empty mount points for the C++ library's directories bound over it,
and the sandbox binds that directory on /usr/include, read-only.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kernelsage.tools.isolation import Mount


def _place_file(source: str, target: Path) -> None:
    """A hard link (never chmod'ed: it is the host's own file), or a copy with the file's mode."""
    try:
        os.link(source, target)
    except OSError:  # another file system, or protected_hardlinks for a file we do not own
        shutil.copy2(source, target)


def place_entry(source: str, target: Path) -> None:
    """`source` (a file, a directory or a link) reproduced at `target`: links as links, files as hard
    links or copies, directories walked."""
    if os.path.islink(source):
        os.symlink(os.readlink(source), target)
    elif os.path.isdir(source):
        target.mkdir(mode=0o755)
        for name in sorted(os.listdir(source)):
            place_entry(os.path.join(source, name), target / name)
        target.chmod(0o755)
    elif os.path.isfile(source):
        _place_file(source, target)


def tree_roots(entries: Sequence[str]) -> list[str]:
    """The outermost directories holding the entries (/usr/include for /usr/include/x86_64-linux-gnu/bits)."""
    kept: list[str] = []
    for parent in sorted({os.path.dirname(e) for e in entries}, key=len):
        if not any(parent == k or parent.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(parent)
    return kept


def build_header_tree(entries: Sequence[str], mount_points: Sequence[str], home: Path) -> list[Mount]:
    """Under `home`, one directory per outermost include directory of `entries` holding only those entries
    (and the empty directories `mount_points` that lie inside it); the mounts that show each in its place."""
    mounts: list[Mount] = []
    for root in tree_roots(entries):
        tree = Path(tempfile.mkdtemp(prefix="include-", dir=home))  # a view per compiler may share a home
        for entry in entries:
            if entry.startswith(root.rstrip("/") + "/"):
                target = tree / os.path.relpath(entry, root)
                target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                place_entry(entry, target)
        for point in mount_points:
            if point.startswith(root.rstrip("/") + "/"):
                (tree / os.path.relpath(point, root)).mkdir(mode=0o755, parents=True, exist_ok=True)
        for directory, _, _ in os.walk(tree):
            os.chmod(directory, 0o755)
        mounts.append(("ro-bind", str(tree), root))
    return mounts
