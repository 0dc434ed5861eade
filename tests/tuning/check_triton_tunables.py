"""Run every autotune configuration of the Triton tunable kernels (tools/triton/examples/tunable) under the
interpreter on its task's cases, in this one process; one JSON line per configuration. Run with TRITON_INTERPRET=1
set before triton is imported (the interpreter replaces triton.language's own @jit functions at import)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.compare import classify, compare_output, poison
from kernelsage.tools.judging.instances import dtype_name
from kernelsage.tuning.space import describe
from kernelsage.tuning.triton_tunables import apply_triton_config, triton_space

FOLDER = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "triton" / "examples" / "tunable"


def statuses(task_id: str, source: str) -> list[str]:
    """The verdict of each of the task's cases."""
    module = types.ModuleType(f"tunable_{task_id}")
    sys.modules[module.__name__] = module
    exec(compile(source, str(FOLDER / f"{task_id}.py"), "exec"), module.__dict__)
    task = find_task(load_suite("builtin", task_ids=[task_id]), task_id)
    found = []
    for index, case in enumerate(task.cases):
        instance = task.instantiate(case, 7 + index)
        expected = instance.reference()
        outputs = [torch.empty_like(e) for e in expected]
        for output in outputs:
            poison(output, 0)
        module.ks_kernel(list(instance.inputs.values()), outputs, dict(instance.attrs))
        found.append(classify([compare_output(e, o, task.tolerance(dtype_name(e.dtype)), 0, i)
                               for i, (e, o) in enumerate(zip(expected, outputs, strict=True))]).value)
    return found


def main() -> None:
    for path in sorted(FOLDER.glob("*.py")):
        files = {"kernel.py": path.read_text(encoding="utf-8")}
        for config in triton_space(files).configs:
            print(json.dumps({"task": path.stem, "config": describe(config),
                              "statuses": statuses(path.stem, apply_triton_config(files, config)["kernel.py"])}))


if __name__ == "__main__":
    main()
