"""Runs on an Ascend host, one process per job: the candidate's module (inside the sandbox) or the task's
reference (trusted, outside it), each call timed by NPU events with the same method.

`python -m kernelsage.tools.ascend.device_runner REQUEST RESULT`: the request (written by the judge) names
the mode, the input sets and the calls; the result (read back by the judge as untrusted data, tensors only)
holds each call's return code, outputs and inputs as they were afterwards, or the timed samples. torch_npu
is imported here and nowhere in the agent's process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

import torch

from kernelsage.tools.ascend.verdicts import OUT_OF_MEMORY_WORDS, STARTED
from kernelsage.tools.compare import poison


class Runtime:
    """The NPU as torch_npu exposes it (the device is npu:0: the job sees only its own NPU)."""

    def __init__(self) -> None:
        import torch_npu  # noqa: F401  (registers torch.npu)

        self.device = torch.device("npu:0")
        torch.npu.set_device(self.device)

    def synchronize(self) -> None:
        torch.npu.synchronize()

    def event(self) -> Any:
        return torch.npu.Event(enable_timing=True)

    def soc(self) -> str:
        return str(torch.npu.get_device_name(0))


def time_calls(call: Callable[[int], object], runtime: Runtime, *, warmup: int, reps: int) -> list[float]:
    """Seconds per call: `warmup` untimed calls, then `reps` calls, each between two NPU events and
    synchronised (METHOD §8); call `i` gets its index (to rotate input sets)."""
    for index in range(warmup):
        call(index)
    runtime.synchronize()
    samples = []
    for index in range(reps):
        start, end = runtime.event(), runtime.event()
        start.record()
        call(index)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return samples


def load_module(path: str, name: str = "kernelsage_ascend_candidate") -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the candidate module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def attribute_lists(attrs: dict[str, Any]) -> tuple[list[Any], ...]:
    """The direct route's parallel attribute lists (names, kinds, ints, floats, int lists, strings)."""
    names, kinds, ints, floats, lists, strings = [], [], [], [], [], []
    for name, value in attrs.items():
        kind = 3 if isinstance(value, str) else 2 if isinstance(value, (tuple, list)) else \
            1 if isinstance(value, float) else 0
        names.append(name)
        kinds.append(kind)
        ints.append(int(value) if kind == 0 else 0)
        floats.append(float(value) if kind == 1 else 0.0)
        lists.append([int(v) for v in value] if kind == 2 else [])
        strings.append(value if kind == 3 else "")
    return names, kinds, ints, floats, lists, strings


class Candidate:
    """The candidate's `run` bound to one route's calling convention."""

    def __init__(self, request: dict[str, Any], runtime: Runtime) -> None:
        self.module = load_module(request["module"])
        self.route = request["route"]
        self.runtime = runtime
        self.workspace = torch.empty(int(request["workspace_bytes"]), dtype=torch.uint8, device=runtime.device)
        self.memory = [int(v) for v in request["memory"]]
        self.soc = request["soc"]

    def __call__(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor], attrs: dict[str, Any],
                 attr_args: list[Any]) -> int:
        if self.route == "msopgen":
            return int(self.module.run(inputs, outputs, *attr_args))
        return int(self.module.run(inputs, outputs, *attribute_lists(attrs), self.workspace, self.memory, self.soc))


def flat_tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a (nested) value in order; a Python number becomes a 0-dim tensor (as a reference's)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in flat_tensors(item)]
    if isinstance(value, (bool, int, float)):
        return [torch.tensor(value)]
    return []


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(item, device) for item in value)
    return value


class SuiteModel:
    """The task's own `ModelNew` (its validation/module.py) calling the candidate's module as `kernel_gen_ops`,
    as NPUKernelBench's harness calls it: `ModelNew(*init)(*args)` on the NPU."""

    GLUE_MODULE = "kernel_gen_ops"

    def __init__(self, request: dict[str, Any], runtime: Runtime) -> None:
        sys.modules[self.GLUE_MODULE] = load_module(request["module"], self.GLUE_MODULE)
        module = types.ModuleType("kernelsage_suite_module")
        exec(compile(request["model_source"], "validation/module.py", "exec"), module.__dict__)
        self.model_class = module.ModelNew
        self.runtime = runtime

    def poison_free_memory(self, item: dict[str, Any], trial: int) -> None:
        """The suite's glue allocates its outputs itself (torch::empty_like): blocks of the outputs' sizes are
        poisoned and freed first, so the allocator's cache most likely hands those back and an element the
        kernel never writes reads as poison (not guaranteed: the judge cannot allocate for the glue)."""
        blocks = empty_outputs(item, self.runtime)
        for block in blocks:
            poison(block, trial)
        self.runtime.synchronize()
        del blocks

    def __call__(self, item: dict[str, Any], trial: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(outputs, the forward inputs afterwards)."""
        device = self.runtime.device
        init, args = to_device(item["init"], device), to_device(item["args"], device)
        self.poison_free_memory(item, trial)
        model = self.model_class(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(device)
        outputs = flat_tensors(model(*args))
        return outputs, flat_tensors(args)


def run_suite_verify(request: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """Each call through the task's ModelNew on its set's arguments; stops at the first error."""
    model = SuiteModel(request, runtime)
    calls: list[dict[str, Any]] = []
    for call in request["calls"]:
        try:
            outputs, inputs = model(request["sets"][call["set"]], call["trial"])
            runtime.synchronize()
        except Exception as exc:
            calls.append({"code": -1, "error": f"{type(exc).__name__}: {exc}"[:2000]})
            break
        calls.append({"code": 0, "outputs": [o.cpu().contiguous() for o in outputs],
                      "inputs": [t.cpu().contiguous() for t in inputs]})
    return {"calls": calls}


def run_suite_profile(request: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """ModelNew timed over rotating sets (its glue's allocations included, as upstream times it), then one
    checked call on the first set."""
    model = SuiteModel(request, runtime)
    sets = request["sets"]
    samples = time_calls(lambda index: model(sets[index % len(sets)], 0), runtime, warmup=request["warmup"],
                         reps=request["reps"])
    outputs, _ = model(sets[0], 0)
    runtime.synchronize()
    return {"samples": samples, "code": 0, "outputs": [o.cpu().contiguous() for o in outputs], "soc": runtime.soc()}


def on_device(sets: list[dict[str, Any]], runtime: Runtime) -> list[list[torch.Tensor]]:
    return [[t.to(runtime.device) for t in item["inputs"]] for item in sets]


def empty_outputs(item: dict[str, Any], runtime: Runtime) -> list[torch.Tensor]:
    return [torch.empty(shape, dtype=getattr(torch, dtype), device=runtime.device) for dtype, shape in item["outputs"]]


def run_verify(request: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """Each call on fresh device copies of its set's inputs, outputs poisoned first; stops at the first error."""
    if request["route"] == "suite":
        return run_suite_verify(request, runtime)
    candidate = Candidate(request, runtime)
    calls: list[dict[str, Any]] = []
    for call in request["calls"]:
        item = request["sets"][call["set"]]
        inputs = [t.to(runtime.device) for t in item["inputs"]]
        outputs = empty_outputs(item, runtime)
        for output in outputs:
            poison(output, call["trial"])
        try:
            code = candidate(inputs, outputs, item["attrs"], item["attr_args"])
            runtime.synchronize()
        except Exception as exc:
            calls.append({"code": -1, "error": f"{type(exc).__name__}: {exc}"[:2000]})
            break
        calls.append({"code": code, "outputs": [o.cpu() for o in outputs], "inputs": [t.cpu() for t in inputs]})
    return {"calls": calls}


def run_profile(request: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """The candidate timed over rotating input sets, then one checked call on the first set."""
    if request["route"] == "suite":
        return run_suite_profile(request, runtime)
    candidate = Candidate(request, runtime)
    sets = request["sets"]
    inputs = on_device(sets, runtime)
    outputs = [empty_outputs(item, runtime) for item in sets]

    def call(index: int) -> object:
        which = index % len(sets)
        return candidate(inputs[which], outputs[which], sets[which]["attrs"], sets[which]["attr_args"])

    samples = time_calls(call, runtime, warmup=request["warmup"], reps=request["reps"])
    for output in outputs[0]:
        poison(output, 0)
    code = call(0)
    runtime.synchronize()
    return {"samples": samples, "code": code, "outputs": [o.cpu() for o in outputs[0]], "soc": runtime.soc()}


def run_reference(request: dict[str, Any], runtime: Runtime) -> dict[str, Any]:
    """The task's reference on the NPU (its CPU tensors moved there as it uses them), timed like the candidate."""
    from kernelsage.tasks.loaders import load_task
    from kernelsage.tasks.model import TaskOrigin
    from kernelsage.tools.ascend.placement import placed_on

    task = load_task(TaskOrigin(**request["origin"]), request["task_id"])
    case = next(c for c in (*task.cases, task.perf_case) if c.name == request["case"])
    instances = [task.instantiate(case, seed) for seed in request["seeds"]]
    with placed_on(runtime.device), torch.no_grad():
        samples = time_calls(lambda index: instances[index % len(instances)].reference(), runtime,
                             warmup=request["warmup"], reps=request["reps"])
    return {"samples": samples, "soc": runtime.soc()}


MODES = {"verify": run_verify, "profile": run_profile, "reference": run_reference}


def main(argv: list[str]) -> int:
    request_path, result_path = argv[1], argv[2]
    if len(argv) > 3:  # tell the judge the sandbox stood and this runner started, before any candidate code
        os.write(int(argv[3]), STARTED)
        os.close(int(argv[3]))
    request = torch.load(request_path, weights_only=True)
    try:
        runtime = Runtime()
    except Exception as exc:  # torch_npu or the device is not usable: the host's problem, not the candidate's
        result = {"failure": "harness", "error": f"the NPU runtime did not start: {type(exc).__name__}: {exc}"}
        traceback.print_exc(file=sys.stderr)
        _write(result, result_path)
        return 0
    try:
        result = MODES[request["mode"]](request, runtime)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        kind = "oom" if any(word in message for word in OUT_OF_MEMORY_WORDS) else "error"
        result = {"failure": kind, "error": message[:4000]}
        traceback.print_exc(file=sys.stderr)
    _write(result, result_path)
    return 0


def _write(result: dict[str, Any], path: str) -> None:
    partial = f"{path}.partial"
    torch.save(result, partial)
    os.replace(partial, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
