"""Where known-good kernels come from: a user's folder, a backend's reference kernels, a suite's answers."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelsage.errors import ConfigurationError
from kernelsage.tasks.model import Task


@dataclass(frozen=True)
class KnownKernel:
    """A kernel taken as correct and fast for one task: its files (name -> source) and where it came from."""

    task_id: str
    files: dict[str, str]
    origin: str

    @property
    def sha256(self) -> str:
        return source_sha256(self.files)


def source_sha256(files: dict[str, str]) -> str:
    """One hash of a candidate's files, independent of their order."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return digest.hexdigest()


def from_folder(folder: Path, names: tuple[str, ...]) -> list[KnownKernel]:
    """A user's kernels: `<task id><suffix>` per task where the backend writes one file (cpu: `l1_relu.cpp`),
    else a folder `<task id>/` holding the backend's files by name."""
    if not folder.is_dir():
        raise ConfigurationError(f"--from {folder}: no such folder (one kernel per task id: <task id>"
                                 f"{Path(names[0]).suffix} or <task id>/{names[0]})")
    kernels = []
    for path in sorted(folder.iterdir()):
        if path.is_dir() and all((path / name).is_file() for name in names):
            files = {name: (path / name).read_text(encoding="utf-8") for name in names}
            kernels.append(KnownKernel(path.name, files, str(path)))
        elif len(names) == 1 and path.is_file() and path.suffix == Path(names[0]).suffix:
            kernels.append(KnownKernel(path.stem, {names[0]: path.read_text(encoding="utf-8")}, str(path)))
    if not kernels:
        raise ConfigurationError(f"--from {folder}: no kernel found (one per task id: <task id>"
                                 f"{Path(names[0]).suffix} or <task id>/{', '.join(names)})")
    return kernels


def backend_examples(backend: str, names: tuple[str, ...]) -> list[KnownKernel]:
    """The reference kernels a backend ships (`kernelsage.tools.<backend>/examples`)."""
    try:
        folder = resources.files(f"kernelsage.tools.{backend}").joinpath("examples")
    except ModuleNotFoundError:
        folder = None
    if folder is None or not folder.is_dir():
        raise ConfigurationError(f"backend {backend!r} ships no reference kernels: give --from DIR or --suite DIR")
    return from_folder(Path(str(folder)), names)


def suite_answers(tasks: list[Task], names_for: Callable[[Task], tuple[str, ...]]) -> list[KnownKernel]:
    """A suite's reference answers: the files the backend writes for a task (`names_for(task)`) in an `answer/`
    folder beside it (inside the task's folder, or `answer/<task id>/` beside its file), as NPUKernelBench keeps
    its solutions; a file is looked for by its path there, else by its name anywhere below."""
    kernels = []
    for task in tasks:
        if task.origin is None:
            continue
        names = names_for(task)
        path = Path(task.origin.path)
        answer = path / "answer" if path.is_dir() else path.parent / "answer" / task.id
        files = {name: found.read_text(encoding="utf-8") for name in names
                 if (found := _find(answer, name)) is not None}
        if files and len(files) == len(names):
            kernels.append(KnownKernel(task.id, files, str(answer)))
    return kernels


def _find(folder: Path, name: str) -> Path | None:
    if not folder.is_dir():
        return None
    direct = folder / name
    return direct if direct.is_file() else next((p for p in sorted(folder.rglob(Path(name).name)) if p.is_file()), None)
