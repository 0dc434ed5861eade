"""Differential runs for the mutation benchmark: the unmutated kernel and a mutant on the same stress inputs,
compared value for value (NaN where NaN), so that a mutant the task's own cases cannot tell apart is called
equivalent only when inputs aimed at every mutant class cannot tell it apart either.

Stress sets, from each of the task's cases: the case's inputs as drawn (`plain`); rounded to halves (`ties`,
with exact zeros); every 7th element NaN (`nan`); scaled by 1e-4 (`tiny`: eps decides a norm); scaled by 100
(`large`: exp overflows); and the first case's sizes changed, every size + 1 (`plus-one`: 2^j + 1 tails) and
skewed (`skewed`: size i + 2i + 1, so no two dimensions stay equal).

This runs OUTSIDE the judge and its sandbox, in a child process (`python bench/mutation_stress.py` reading a
JSON job on stdin, printing one JSON line per set): only mutants of the project's own honest kernels, made by
bench/mutants.py, come here, never a model's code. A crash ends the child; the parent reads how far it got.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

VALUE_MODES = ("plain", "ties", "nan", "tiny", "large")
SHAPE_MODES = ("plus-one", "skewed")
MAX_ELEMENTS = 1 << 18  # stress sets larger than this are skipped (the interpreter is slow)


def _float(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point()


def transform(tensor: torch.Tensor, mode: str) -> torch.Tensor:
    """One input tensor as a stress mode wants it (non-float tensors are left alone)."""
    if not _float(tensor) or mode == "plain":
        return tensor
    wide = tensor.float()
    if mode == "ties":
        wide = torch.round(wide * 2) / 2
    elif mode == "nan":
        wide = wide.clone().reshape(-1)
        wide[3::7] = float("nan")
        wide = wide.reshape(tensor.shape)
    elif mode == "tiny":
        wide = wide * 1e-4
    elif mode == "large":
        wide = wide * 100
    return wide.to(tensor.dtype).contiguous()


def _resized(value: Any, offsets: Iterator[int]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, tuple)):
        return value
    if isinstance(value, int):
        return value + next(offsets) if value >= 2 else value
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(v + next(offsets) if v >= 2 else v for v in value)
    return value


def shape_variant(case: Any, mode: str) -> Any:
    steps = iter(range(1, 1000, 2)) if mode == "skewed" else iter([1] * 1000)
    return dataclasses.replace(case, name=f"{case.name}-{mode}",
                               params={k: _resized(v, steps) for k, v in case.params.items()})


def stress_sets(task: Any, seed: int) -> Iterator[tuple[str, list[torch.Tensor], dict[str, Any], list[torch.Tensor]]]:
    """(name, inputs, attrs, expected outputs) for every stress set that can be built; the outputs' shapes and
    dtypes are what the kernel must fill."""
    for index, case in enumerate(task.cases):
        cases = [(case, VALUE_MODES)]
        if index == 0:
            cases += [(shape_variant(case, mode), ("plain",)) for mode in SHAPE_MODES]
        for variant, modes in cases:
            try:
                instance = task.instantiate(variant, seed + index)
            except Exception:  # a size the task's generator refuses: no such set
                continue
            if sum(t.numel() for t in instance.inputs.values()) > MAX_ELEMENTS:
                continue
            expected = list(instance.reference())  # only its shapes and dtypes are used
            for mode in modes:
                inputs = [transform(t, mode) for t in instance.inputs.values()]
                yield f"{variant.name}/{mode}", inputs, dict(instance.attrs), expected


# -- running a kernel ---------------------------------------------------------------------------------------

MAX_DIMS = 8
DTYPES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3, torch.int32: 4, torch.int64: 5,
          torch.int8: 6, torch.uint8: 7, torch.bool: 8}


class KsTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS)]


class KsAttr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("i", ctypes.c_int64), ("f", ctypes.c_double),
                ("ints", ctypes.POINTER(ctypes.c_int64)), ("n_ints", ctypes.c_int64), ("s", ctypes.c_char_p)]


def _tensor(t: torch.Tensor) -> KsTensor:
    desc = KsTensor(data=t.data_ptr(), dtype=DTYPES[t.dtype], ndim=t.dim())
    for d in range(t.dim()):
        desc.shape[d], desc.strides[d] = t.shape[d], t.stride(d)
    return desc


def _attrs(attrs: dict[str, Any]) -> tuple[Any, list[Any]]:
    keep: list[Any] = []
    items = (KsAttr * max(1, len(attrs)))()
    for slot, (name, value) in zip(items, attrs.items(), strict=False):
        slot.name = name.encode()
        if isinstance(value, int):  # bool included
            slot.kind, slot.i = 0, int(value)
        elif isinstance(value, float):
            slot.kind, slot.f = 1, value
        elif isinstance(value, str):
            slot.kind, slot.s = 3, value.encode()
        else:
            array = (ctypes.c_int64 * len(value))(*value)
            keep.append(array)
            slot.kind, slot.ints, slot.n_ints = 2, ctypes.cast(array, ctypes.POINTER(ctypes.c_int64)), len(value)
    return items, keep


def cpu_runner(library: str) -> Callable[[list[torch.Tensor], list[torch.Tensor], dict[str, Any]], None]:
    kernel = ctypes.CDLL(library).ks_kernel

    def run(inputs: list[torch.Tensor], outputs: list[torch.Tensor], attrs: dict[str, Any]) -> None:
        ins = (KsTensor * max(1, len(inputs)))(*map(_tensor, inputs))
        outs = (KsTensor * max(1, len(outputs)))(*map(_tensor, outputs))
        items, _keep = _attrs(attrs)
        code = kernel(ins, len(inputs), outs, len(outputs), items, len(attrs))
        if code:
            raise RuntimeError(f"ks_kernel returned {code}")
    return run


def triton_runner(path: str) -> Callable[[list[torch.Tensor], list[torch.Tensor], dict[str, Any]], None]:
    module = types.ModuleType(f"mutant_{abs(hash(path))}")
    module.__dict__["__file__"] = path
    sys.modules[module.__name__] = module  # triton's jit reads the function's module
    with open(path, encoding="utf-8") as handle:
        exec(compile(handle.read(), path, "exec"), module.__dict__)
    return lambda inputs, outputs, attrs: module.ks_kernel(inputs, outputs, attrs)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN where NaN (-0.0 equals 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    return torch.equal(nan_a, nan_b) and torch.equal(a[~nan_a], b[~nan_b])


def outputs_of(run: Callable, inputs: list[torch.Tensor], expected: list[torch.Tensor],
               attrs: dict[str, Any]) -> list[torch.Tensor]:
    outputs = [torch.full_like(e, 7) for e in expected]  # the same poison for both kernels
    run([t.clone() for t in inputs], outputs, dict(attrs))
    return outputs


def main() -> None:
    job = json.loads(sys.stdin.read())
    torch.manual_seed(0)
    if job["backend"] == "triton":
        os.environ["TRITON_INTERPRET"] = "1"
        original, mutant = triton_runner(job["original"]), triton_runner(job["mutant"])
    else:
        torch.set_num_threads(1)
        original, mutant = cpu_runner(job["original"]), cpu_runner(job["mutant"])
    from kernelsage.tasks.loaders import find_task, load_suite

    suite = job["suite"]
    task = find_task(load_suite(suite, task_ids=[job["task_id"]]) if suite == "builtin" else load_suite(suite),
                     job["task_id"])
    for name, inputs, attrs, expected in stress_sets(task, job["seed"]):
        try:
            want = outputs_of(original, inputs, expected, attrs)
        except Exception as error:  # the unmutated kernel refuses this set (a size it does not support)
            print(json.dumps({"set": name, "verdict": "skipped", "why": str(error)[:200]}), flush=True)
            continue
        try:
            got = outputs_of(mutant, inputs, expected, attrs)
        except Exception as error:
            print(json.dumps({"set": name, "verdict": "differs", "why": f"raised {error!s:.200}"}), flush=True)
            continue
        verdict = "same" if all(same(a, b) for a, b in zip(want, got, strict=True)) else "differs"
        print(json.dumps({"set": name, "verdict": verdict}), flush=True)


if __name__ == "__main__":
    main()
