"""A candidate given on the command line (`check`, `tune --source`): one file, or a directory of several.

One-file candidates are named as the backend expects for the task (a NPUKernelBench task's kernel-only
candidate is `op_kernel/<op>.cpp`, whatever the user's file is called). A directory holds a candidate of
several files at their paths (an msopgen op_host + op_kernel pair); the backend's own layout rules judge
which files it may contain, so this module only reads, bounds and names them.
"""

from __future__ import annotations

from pathlib import Path

from kernelsage.cli.invocation import program
from kernelsage.errors import ConfigurationError

MAX_FILES = 64
MAX_BYTES = 4 << 20  # a candidate is source code: a bigger directory is almost surely the wrong one


def check_source_exists(source: Path) -> None:
    """Refuse a `--source` that is neither a file nor a directory, before anything heavy loads."""
    if not source.exists():
        raise ConfigurationError(f"{source}: no such source file or directory")
    if not (source.is_file() or source.is_dir()):
        raise ConfigurationError(f"{source} is not a regular file: give the kernel's source file")


def candidate_name(source: Path, expected: tuple[str, ...]) -> str:
    """The name the backend sees for a one-file candidate: a plain C++ file keeps its own name (.cpp, .cc,
    .cxx) where the backend expects a plain .cpp; a path the task fixes (op_kernel/<op>.cpp) or another
    language's file takes the expected name."""
    name = expected[0]
    if "/" not in name and name.endswith(".cpp") and source.suffix in (".cpp", ".cc", ".cxx"):
        return source.name
    return name


def named_for_task(files: dict[str, str], expected: tuple[str, ...]) -> dict[str, str]:
    """A one-file kernel under the name the backend sees for the task (`candidate_name`: `eval` finds
    `<task_id>.cpp`, a NPUKernelBench task's kernel-only candidate is op_kernel/<op>.cpp); others as they are."""
    if len(files) == 1 and len(expected) == 1:
        ((name, text),) = files.items()
        return {candidate_name(Path(name), expected): text}
    return files


def read_candidate(source: Path, expected: tuple[str, ...], *, task_id: str, backend: str) -> dict[str, str]:
    """The candidate's files by the names the backend sees; ConfigurationError naming what is wrong."""
    check_source_exists(source)
    wanted = ", ".join(expected)
    if source.is_file():
        if len(expected) > 1:
            raise ConfigurationError(f"a candidate for {task_id} on {backend} is {len(expected)} files ({wanted}): "
                                     f"give --source the directory that holds them at those paths")
        return {candidate_name(source, expected): _text(source)}
    files = _directory_files(source)
    if not files or (not set(expected) & set(files) and all("/" not in name for name in files)):
        raise ConfigurationError(f"{source} is a directory, not a source file, and holds no {wanted}: give the kernel's file (e.g. "
                                 f"{source}/{Path(expected[0]).name}), a directory holding {wanted}, or score a "
                                 f"directory of kernels with `{program()} eval {source}`")
    missing = [name for name in expected if name not in files]
    if len(expected) > 1 and missing:
        raise ConfigurationError(f"{source} lacks {', '.join(missing)}: a candidate for {task_id} on {backend} is "
                                 f"{wanted}")
    return files


def _directory_files(directory: Path) -> dict[str, str]:
    paths = sorted(p for p in directory.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(directory).parts))
    if len(paths) > MAX_FILES:
        raise ConfigurationError(f"{directory} holds {len(paths)} files; a candidate has at most {MAX_FILES}: "
                                 "give the directory of one kernel")
    _check_size(directory, sum(p.stat().st_size for p in paths))
    return {p.relative_to(directory).as_posix(): _text(p) for p in paths}


def _check_size(source: Path, size: int) -> None:
    if size > MAX_BYTES:
        raise ConfigurationError(f"{source} holds more than {MAX_BYTES >> 20} MiB: a candidate is the source code "
                                 "of one kernel")


def _text(path: Path) -> str:
    try:
        _check_size(path, path.stat().st_size)
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{path} is not UTF-8 text (byte {exc.start}): a candidate is source code") from None
    except OSError as exc:
        raise ConfigurationError(f"{path} cannot be read: {exc.strerror}") from None
