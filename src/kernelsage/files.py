"""Files written whole: what a cache entry, a run's metadata or a build record holds is either the old
contents or the new, never a half-written file, whoever writes beside it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes | str, *, mode: int | None = None) -> None:
    """Write `path` through a temporary file of its own in the same directory, renamed over it: threads
    and processes writing the same path at once never share a partial file (a name built from the pid
    would be shared by threads), and a reader never sees one. `mode`: the file's permissions."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
