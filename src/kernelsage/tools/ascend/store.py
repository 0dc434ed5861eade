"""The ascend build cache: content-addressed entries written only by the trusted side, verified before use.

An entry is `<key>/result.json` (the CompileResult) and `<key>/artifact/` (the candidate's Python module and,
for the msopgen route, its installed custom-op package). The artifact's sha256 is taken over a manifest of
every file (relative path and content hash), so any changed, added or removed file is noticed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

from kernelsage.files import write_atomically
from kernelsage.tools.results import Artifact, CompileResult, Status

CACHEABLE = (Status.OK, Status.COMPILE_ERROR, Status.FORBIDDEN)
MAX_ARTIFACT_BYTES = 1 << 30


def tree_digest(root: Path) -> str:
    """The sha256 of a directory's manifest (sorted relative paths and file hashes); symbolic links and
    special files make it invalid (raises OSError)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode):
            continue
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path.relative_to(root)} is not a regular file")
        digest.update(f"{path.relative_to(root).as_posix()}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n"
                      .encode())
    return digest.hexdigest()


def copy_regular_tree(source: Path, target: Path) -> None:
    """Copy the regular files and directories of `source` (written by a sandbox: links are refused)."""
    total = 0
    for path in sorted(source.rglob("*")):
        info = path.lstat()
        destination = target / path.relative_to(source)
        if stat.S_ISDIR(info.st_mode):
            destination.mkdir(parents=True, exist_ok=True)
        elif stat.S_ISREG(info.st_mode):
            total += info.st_size
            if total > MAX_ARTIFACT_BYTES:
                raise OSError(f"the build output is larger than {MAX_ARTIFACT_BYTES >> 20} MiB")
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
            os.chmod(destination, 0o555 if path.suffix == ".so" or os.access(path, os.X_OK) else 0o444)
        else:
            raise OSError(f"the build produced {path.relative_to(source)}, which is not a regular file")


class AscendCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._replacing = threading.Lock()  # one thread swaps an entry's artifact at a time

    def lookup(self, key: str) -> CompileResult | None:
        """The cached result for `key`, if its artifact (when it has one) is intact."""
        try:
            result = CompileResult.model_validate_json((self.root / key / "result.json").read_text())
        except (OSError, ValueError):
            return None
        if result.artifact is not None and not self.intact(result.artifact):
            return None
        return result.model_copy(update={"cached": True, "seconds": 0.0})

    @staticmethod
    def intact(artifact: Artifact) -> bool:
        try:
            return bool(artifact.sha256) and tree_digest(Path(artifact.path)) == artifact.sha256
        except OSError:
            return False

    def store(self, key: str, built: Path) -> Artifact:
        """Copy a build's output directory into the cache (replacing an old entry) and name it."""
        entry = self.root / key
        entry.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=".artifact.", suffix=".partial", dir=entry))  # one per writer
        copy_regular_tree(built, partial / "artifact")
        target = entry / "artifact"
        with self._replacing:
            if target.exists():
                shutil.rmtree(target, ignore_errors=True)
            os.replace(partial / "artifact", target)
            digest = tree_digest(target)
        partial.rmdir()
        return Artifact(backend="ascend", path=str(target), key=key, sha256=digest)

    def remember(self, key: str, result: CompileResult) -> None:
        if result.status not in CACHEABLE:
            return
        entry = self.root / key
        entry.mkdir(parents=True, exist_ok=True)
        write_atomically(entry / "result.json", result.model_dump_json())
