"""KernelBench-style tasks: one .py file per operator with `Model`, `get_inputs()` and `get_init_inputs()`.

The files carry one input configuration, so a task has one test case ("default"), which is also its
performance case; fresh random inputs per trial still vary the values.
"""

from __future__ import annotations

from pathlib import Path

from kernelsage.tasks.loaders.common import LoadReport, collect, import_file, level_from_path, reference_model
from kernelsage.tasks.loaders.module_task import module_instantiate
from kernelsage.tasks.model import Task, TaskOrigin, TestCase


def kernelbench_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*.py") if not p.name.startswith("_"))


def task_id_for(path: Path, root: Path) -> str:
    if root.is_file():
        return path.stem
    return path.relative_to(root).with_suffix("").as_posix()


def load_kernelbench_file(path: Path, root: Path) -> Task:
    module = import_file(path)
    model_class = reference_model(module, module, module_path=path, inputs_path=path)
    relative = path.relative_to(root) if root.is_dir() else Path(path.name)
    parent = relative.parent.name
    category = parent if parent and not parent.lower().startswith("level") else "kernelbench"
    doc = (module.__doc__ or model_class.__doc__ or "").strip()
    description = (f"{doc}\n\n" if doc else "") + f"Reference (PyTorch, {path.name}):\n" + path.read_text()
    default = TestCase(name="default")
    return Task(
        id=task_id_for(path, root), level=level_from_path(relative.parts), category=category,
        description=description, cases=(default,), perf_case=default,
        instantiate=module_instantiate(model_class, lambda case: module.get_inputs(),
                                       lambda case: module.get_init_inputs()),
        origin=TaskOrigin(format="kernelbench", root=str(root), path=str(path)),
    )


def load_kernelbench_dir(root: Path) -> LoadReport:
    return collect(kernelbench_files(root), lambda path: load_kernelbench_file(path, root))
