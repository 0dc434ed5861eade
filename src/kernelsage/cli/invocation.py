"""How this process was started, as words a printed command can begin with, so that it pastes as it is.

`make demo` runs `.venv/bin/kernelsage`, which is not on PATH; a command printed as `kernelsage memory ...`
would then fail with "command not found". The printed prefix is the one that started this process:
`kernelsage` when that name on PATH is this very program, else the path it was run by (relative as typed,
which works from the same directory), or `<python> -m kernelsage` when it ran as a module.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

NAME = "kernelsage"


def program(argv0: str | None = None, *, executable: str | None = None, path: str | None = None) -> str:
    """The words that start kernelsage the way this process was started (see the module docstring).
    `argv0`, `executable` and `path` default to this process's; tests pass their own."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = executable or sys.executable
    script = Path(argv0)
    if script.stem == NAME and script.is_file():  # the console script (kernelsage, kernelsage.exe)
        return _on_path(script.name, argv0, path) or _shortest(argv0)
    # `python -m kernelsage`, or a host such as a test runner: the module runs with this interpreter
    return f"{_on_path('python', executable, path) or _shortest(executable)} -m {NAME}"


def _on_path(name: str, target: str, path: str | None) -> str | None:
    """`name` when PATH finds exactly `target` under it (not resolving links: a venv's python is a link to
    the system's, and only the venv's finds kernelsage)."""
    found = shutil.which(name, path=path)
    return name if found and os.path.abspath(found) == os.path.abspath(target) else None


def _shortest(file: str) -> str:
    """The file as a path that works from here: relative when it lies below the working directory."""
    absolute = Path(os.path.abspath(file))
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return shlex.quote(str(absolute))
    return shlex.quote(relative.as_posix() if relative.parent != Path(".") else f"./{relative.as_posix()}")
