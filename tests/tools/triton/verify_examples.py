"""Run every shipped Triton reference kernel under the interpreter on its task's test cases, in this one process
(a runner per kernel would start torch and triton 17 times), with the sandbox's guard: the reduced builtins and
the dispatch mode that refuses borrowed compute, and under the runner's seccomp filter for the interpreter
(installed once the tasks are loaded, before the first kernel is read). Prints one JSON line per kernel. Run
with TRITON_INTERPRET=1."""

from __future__ import annotations

import json
import sys
import types
from importlib import resources

import torch
import triton.runtime.interpreter  # noqa: F401  (loaded before the filter, as the runner does)

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.compare import classify, compare_output, poison
from kernelsage.tools.judging.instances import dtype_name
from kernelsage.tools.triton.sandbox.guard import Refusals, compute_guard, safe_builtins
from kernelsage.tools.triton.sandbox.syscall_filter import install as install_syscall_filter
from kernelsage.tools.triton.source_check import check_source


def load(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(__builtins__=safe_builtins())
    sys.modules[name] = module
    path = str(resources.files("kernelsage.tools.triton.examples").joinpath(f"{name}.py"))
    module.__dict__["__file__"] = path
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def main() -> None:
    folder = resources.files("kernelsage.tools.triton.examples")
    names = sorted(f.name[:-3] for f in folder.iterdir() if f.name.endswith(".py") and f.name[0] != "_")
    report = load_suite("builtin", "auto", task_ids=names)
    install_syscall_filter("interpret")
    with open("/proc/self/status", encoding="ascii") as status_file:
        filtered = any(line.split() == ["Seccomp:", "2"] for line in status_file)  # 2: a filter is installed
    for name in names:
        source = folder.joinpath(f"{name}.py").read_text(encoding="utf-8")
        problems = [p.message for p in check_source(source)]
        status, refused = "ok", []
        if not problems:
            task = find_task(report, name)
            kernel = load(name, source).ks_kernel
            for index, case in enumerate(task.cases):
                instance = task.instantiate(case, 1000 + index)
                expected = instance.reference()
                outputs = [torch.empty_like(e) for e in expected]
                for output in outputs:
                    poison(output, 0)
                refusals = Refusals()
                with compute_guard(refusals):
                    kernel(list(instance.inputs.values()), outputs, dict(instance.attrs))
                tolerances = [task.tolerance(dtype_name(e.dtype)) for e in expected]
                verdict = classify([compare_output(e, a, t, 0, i) for i, (e, a, t)
                                    in enumerate(zip(expected, outputs, tolerances, strict=True))])
                refused += refusals.names
                if verdict.value != "ok":
                    status = f"{verdict.value} in case {case.name}"
                    break
        print(json.dumps({"task": name, "problems": problems, "status": status, "refused": refused,
                          "filtered": filtered}), flush=True)


if __name__ == "__main__":
    main()
