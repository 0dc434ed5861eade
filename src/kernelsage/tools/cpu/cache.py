"""The build cache: content-addressed, written only by the trusted side, verified before every use.

An entry is `<key>/result.json` (the CompileResult, whose artifact records the library's sha256) and
`<key>/kernel.so`. The key hashes the sources, flags, compiler, ABI header and symbol policy. A library whose
bytes no longer hash to the recorded value is not used: the entry is rebuilt.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kernelsage.files import write_atomically
from kernelsage.tools.cpu.build import LIBRARY_NAME
from kernelsage.tools.results import Artifact, CompileResult, Status

CACHEABLE = (Status.OK, Status.COMPILE_ERROR, Status.FORBIDDEN)  # decided by the source alone


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class BuildCache:
    def __init__(self, root: Path, backend: str) -> None:
        self.root = root
        self.backend = backend

    def entry(self, key: str) -> Path:
        return self.root / key

    def lookup(self, key: str) -> CompileResult | None:
        """The cached result for `key`, if its library (when it has one) is intact."""
        record = self.entry(key) / "result.json"
        try:
            result = CompileResult.model_validate_json(record.read_text())
        except (OSError, ValueError):
            return None
        artifact = result.artifact
        if artifact is not None:
            try:
                intact = bool(artifact.sha256) and sha256_of(Path(artifact.path)) == artifact.sha256
            except OSError:
                intact = False
            if not intact:
                return None
        return result.model_copy(update={"cached": True, "seconds": 0.0})

    def store(self, key: str, library: bytes) -> Artifact:
        """Write a checked library into the cache (atomically) and name it by path, key and hash."""
        entry = self.entry(key)
        entry.mkdir(parents=True, exist_ok=True)
        target = entry / LIBRARY_NAME
        write_atomically(target, library, mode=0o444)  # a concurrent reader sees the old file or the new one
        return Artifact(backend=self.backend, path=str(target), key=key,
                        sha256=hashlib.sha256(library).hexdigest())

    def remember(self, key: str, result: CompileResult) -> None:
        if result.status not in CACHEABLE:
            return
        entry = self.entry(key)
        entry.mkdir(parents=True, exist_ok=True)
        write_atomically(entry / "result.json", result.model_dump_json())
