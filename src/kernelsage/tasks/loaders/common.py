"""What every loader shares: the load report, importing a task file, naming where it failed."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch

from kernelsage.errors import TaskLoadError
from kernelsage.tasks.loaders.tracks import Track
from kernelsage.tasks.model import Task


@dataclass(frozen=True)
class LoadProblem:
    """A task file that could not be loaded, and why (with the id and level it would have had, where a file
    or folder is one task)."""

    path: str
    message: str
    task_id: str = ""
    level: int = 1


@dataclass
class LoadReport:
    """The tasks of a suite that loaded, and the problems of those that did not (they are skipped)."""

    tasks: list[Task] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # every task id of the suite, where only some were loaded
    tracks: list[Track] = field(default_factory=list)  # the kernel languages the suite's checkout declares

    def get(self, task_id: str) -> Task | None:
        return next((task for task in self.tasks if task.id == task_id), None)


def collect(sources: Iterable[Path], load_one: Callable[[Path], Task],
            identify: Callable[[Path], tuple[str, int]] | None = None) -> LoadReport:
    """Load one task per source; a source that fails is reported and skipped, never fatal. `identify(source)`
    gives the id and level a failed source's task would have had."""
    report = LoadReport()
    for source in sources:
        try:
            report.tasks.append(load_one(source))
        except TaskLoadError as exc:
            task_id, level = identify(source) if identify else ("", 1)
            report.problems.append(LoadProblem(str(source), str(exc), task_id, level))
    return report


def import_file(path: Path, extra_sys_path: Path | None = None) -> ModuleType:
    """Execute a Python file as a fresh module; any failure becomes a TaskLoadError naming the file and line."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"kernelsage_task_{digest}_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskLoadError(f"{path}: not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    added = extra_sys_path is not None and str(extra_sys_path) not in sys.path
    if added:
        sys.path.insert(0, str(extra_sys_path))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise TaskLoadError(f"{path}{_line_in(exc, path)}: {type(exc).__name__}: {exc}") from exc
    finally:
        if added:
            sys.path.remove(str(extra_sys_path))
    return module


def _line_in(exc: BaseException, path: Path) -> str:
    """':LINE' of the deepest frame of the traceback that lies in `path` (or of a syntax error in it)."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f":{exc.lineno}"
    resolved = str(path.resolve())
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__)
             if str(Path(frame.filename).resolve()) == resolved]
    return f":{lines[-1]}" if lines else ""


def level_from_path(parts: tuple[str, ...], default: int = 1) -> int:
    """The N of the first 'levelN' directory among `parts` ('level_N', and a suffix as in
    MultiKernelBench's 'npukernelbench_level2', count too), else `default`."""
    for part in parts:
        match = re.search(r"(?:^|_)level[_-]?(\d+)$", part, flags=re.IGNORECASE)
        if match:
            return int(match.group(1))
    return default


def reference_model(module: ModuleType, inputs: ModuleType, *, module_path: Path, inputs_path: Path,
                    signature: str = "", factory: str = "get_inputs") -> type[torch.nn.Module]:
    """The reference's `class Model(nn.Module)`, once the input factory and `get_init_inputs` are there too."""
    model_class = getattr(module, "Model", None)
    if not (isinstance(model_class, type) and issubclass(model_class, torch.nn.Module)):
        raise TaskLoadError(f"{module_path}: no `class Model(nn.Module)`")
    for function in (factory, "get_init_inputs"):
        if not callable(getattr(inputs, function, None)):
            raise TaskLoadError(f"{inputs_path}: no {function}({signature}) function")
    return model_class
