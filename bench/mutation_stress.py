"""Differential runs for the mutation benchmark: the unmutated kernel and a mutant on the same stress inputs, each
judged against the task's reference by the task's own tolerance, so that a mutant the task's own cases cannot
tell apart is called equivalent only when inputs aimed at every mutant class cannot tell it apart either.

Stress sets, from each of the task's cases: the case's inputs as drawn (`plain`); rounded to halves (`ties`,
with exact zeros); scaled by 1e-4 (`tiny`: eps decides a norm), by 100 (`large`: exp overflows) and by 1e5
(`huge`: past float16's largest value, 65504, so a kernel that rounds to half gets inf where the reference
stays finite); for tasks whose first two inputs are one shape, as is their first output (element-wise pairs: a
and b, x and its residual), the second made close to +-the first, b = +-a * (1 + 1e-4 * noise), at scales 1
and 100 (`close`, `close-large`: a difference or sum cancels, so an input rounded early shows); the special
values a task's description promises an answer for (`special`, PROMISES below); NaN (`nan`) for every task
whose description does not promise what NaN gives; and the first case's sizes changed, every size + 1
(`plus-one`: 2^j + 1 tails) and skewed (`skewed`: size i + 2i + 1, so no two dimensions stay equal).

The contract. A set is within the task's contract unless it feeds values the description promises nothing
for: the `nan` set is outside it (its record says why), and a scaled set is dropped (`skipped`) where scaling
turned a finite input non-finite (half's range) or made the reference's outputs non-finite where the case's
were finite. A mutant differing from the unmutated kernel only on sets outside the contract is equivalent by
the contract, and the benchmark reports it apart from the other equivalents.

The verdict of a set: `same` (equal values, NaN where NaN), `within` (values differ, and at every element where
they do, both pass the task's tolerance check against the reference: so the mutant is right wherever the
unmutated kernel is, and gives the same value wherever the unmutated kernel is not) or `differs`. A task
with its own precision check (custom_check) is judged by it as a whole: the mutant must pass where the
unmutated kernel passes, and give equal values where it does not.

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
from dataclasses import dataclass
from typing import Any

import torch

INF, NAN = float("inf"), float("nan")
VALUE_MODES = ("plain", "ties", "special", "nan", "tiny", "large", "huge", "close", "close-large")
SCALES = {"tiny": 1e-4, "large": 100.0, "huge": 1e5}
SHAPE_MODES = ("plus-one", "skewed")
MAX_ELEMENTS = 1 << 18  # stress sets larger than this are skipped (the interpreter is slow)


@dataclass(frozen=True)
class Promise:
    """What a task's description says NaN or +-inf give: the values its `special` set may hold, the words of the
    description that promise it (checked to be there by tests/tools/test_mutants.py), and whether every row
    must keep a finite value."""

    values: tuple[float, ...]
    quote: str
    finite_row: bool = False


# Every built-in task whose description promises an answer for NaN or +-inf (src/kernelsage/tasks/suites/builtin/
# level*.py). Other tasks get no special values inside their contract; the test fails when a description that
# mentions NaN or inf is missing here.
PROMISES: dict[str, Promise] = {
    "l1_greater": Promise((NAN, INF, -INF), "any comparison with NaN is false and +-inf compare as the IEEE 754 "
                                            "infinities"),
    "l1_sigmoid": Promise((INF, -INF), "sigmoid(+inf) = 1, sigmoid(-inf) = 0"),
    "l1_clamp": Promise((INF, -INF), "x may hold +-inf (clamped like any value)"),
    "l2_softmax": Promise((-INF,), "x may hold -inf (a masked place: probability 0); every row has a finite value",
                          finite_row=True),
}


def outside_contract(task_id: str, mode: str) -> str:
    """Why a stress mode's inputs lie outside the task's contract, or '' when they lie inside."""
    if mode != "nan":
        return ""
    promise = PROMISES.get(task_id)
    if promise is None:
        return f"{task_id}'s description promises nothing for NaN"
    return f"{task_id}'s description promises an answer only for {', '.join(map(str, promise.values))}"


@dataclass
class StressSet:
    """One set of inputs, the reference's outputs for them, and why it lies outside the contract ('' inside)."""

    name: str
    inputs: list[torch.Tensor]
    attrs: dict[str, Any]
    expected: tuple[torch.Tensor, ...]
    case: Any
    outside: str = ""
    skipped: str = ""  # why the set is not run at all


def _sprinkle(wide: torch.Tensor, values: tuple[float, ...], start: int) -> torch.Tensor:
    flat = wide.clone().reshape(-1)
    places = flat[start::7].numel()
    flat[start::7] = torch.tensor(values, dtype=flat.dtype).repeat(places // len(values) + 1)[:places]
    return flat.reshape(wide.shape)


def transform(tensor: torch.Tensor, mode: str, index: int = 0, promise: Promise | None = None) -> torch.Tensor:
    """One input tensor (the `index`-th) as a single-tensor stress mode wants it (non-float ones left alone)."""
    if not tensor.is_floating_point() or mode == "plain":
        return tensor
    wide = tensor.float()
    if mode == "ties":
        wide = torch.round(wide * 2) / 2
    elif mode == "nan":
        wide = _sprinkle(wide, (NAN,), 3)
    elif mode == "special" and promise is not None:
        # other places in each input, so a pair mixes special with finite values as well as with each other
        special = _sprinkle(wide, promise.values[index % len(promise.values):] + promise.values, 3 + 2 * index)
        if promise.finite_row and wide.dim() > 0:
            special[..., 0] = wide[..., 0]
        wide = special
    elif mode in SCALES:
        wide = wide * SCALES[mode]
    return wide.to(tensor.dtype).contiguous()


def paired(inputs: list[torch.Tensor], expected: tuple[torch.Tensor, ...]) -> bool:
    """Whether the first two inputs are an element-wise pair: float, one shape, and the first output's shape."""
    return len(inputs) >= 2 and bool(expected) and inputs[0].is_floating_point() and \
        inputs[1].is_floating_point() and inputs[0].shape == inputs[1].shape == expected[0].shape


def close_pair(inputs: list[torch.Tensor], scale: float, generator: torch.Generator) -> list[torch.Tensor]:
    """The pair's second input made b = +-a * (1 + 1e-4 * noise), signs alternating (a - b and a + b both cancel),
    the first scaled by `scale`."""
    a = inputs[0].float() * scale
    noise = torch.randn(a.shape, generator=generator)
    sign = torch.ones(a.numel()).index_fill_(0, torch.arange(1, a.numel(), 2), -1.0).reshape(a.shape)
    b = sign * a * (1 + 1e-4 * noise)
    return [a.to(inputs[0].dtype), b.to(inputs[1].dtype), *inputs[2:]]


def stressed(inputs: list[torch.Tensor], mode: str, promise: Promise | None, seed: int) -> list[torch.Tensor]:
    """Every input as the mode wants it."""
    if mode in ("close", "close-large"):
        return close_pair(inputs, 100.0 if mode == "close-large" else 1.0, torch.Generator().manual_seed(seed))
    return [transform(t, mode, i, promise) for i, t in enumerate(inputs)]


def _nonfinite(tensors: Any) -> int:
    return sum(int((~torch.isfinite(t)).sum()) for t in tensors if t.is_floating_point())


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


def modes_for(task_id: str, paired_inputs: bool) -> tuple[str, ...]:
    """The value modes a task's cases get."""
    promise = PROMISES.get(task_id)
    skip = {"special"} if promise is None else set()
    if promise is not None and any(v != v for v in promise.values):
        skip.add("nan")  # NaN is promised: `special` already holds it, inside the contract
    if not paired_inputs:
        skip |= {"close", "close-large"}
    return tuple(m for m in VALUE_MODES if m not in skip)


def _reference_on(instance: Any, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The reference's outputs for other input values: written into the instance's own tensors, which the
    reference reads (the built-in suite binds them; loaded modules share their storage)."""
    with torch.no_grad():
        for mine, value in zip(instance.inputs.values(), inputs, strict=True):
            mine.copy_(value)
    with torch.inference_mode():
        return tuple(t.clone() for t in instance.reference())


def stress_sets(task: Any, seed: int) -> Iterator[StressSet]:
    """Every stress set that can be built, with the reference's outputs for its inputs."""
    for index, case in enumerate(task.cases):
        variants = [(case, None)]
        if index == 0:
            variants += [(shape_variant(case, mode), ("plain",)) for mode in SHAPE_MODES]
        for variant, only in variants:
            try:
                instance = task.instantiate(variant, seed + index)
            except Exception:  # a size the task's generator refuses: no such set
                continue
            if sum(t.numel() for t in instance.inputs.values()) > MAX_ELEMENTS:
                continue
            drawn = [t.clone() for t in instance.inputs.values()]
            with torch.inference_mode():
                plain = tuple(t.clone() for t in instance.reference())  # a reference may return an input
            for mode in only or modes_for(task.id, paired(drawn, plain)):
                inputs = stressed(drawn, mode, PROMISES.get(task.id), seed + index)
                name = f"{variant.name}/{mode}"
                expected = plain if mode == "plain" else _reference_on(instance, inputs)
                skipped = ""
                if mode in (*SCALES, "close", "close-large", "ties"):
                    if _nonfinite(inputs) > _nonfinite(drawn):
                        skipped = "outside the task's contract: scaling made a finite input non-finite"
                    elif _nonfinite(expected) > _nonfinite(plain):
                        skipped = "outside the task's contract: the reference's outputs are not finite"
                yield StressSet(name, inputs, dict(instance.attrs), expected, variant,
                                outside_contract(task.id, mode), skipped)


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


def outputs_of(run: Callable, inputs: list[torch.Tensor], expected: tuple[torch.Tensor, ...],
               attrs: dict[str, Any]) -> list[torch.Tensor]:
    from kernelsage.tools.compare import poison

    outputs = [torch.empty_like(e) for e in expected]
    for output in outputs:
        poison(output, 0)  # the judge's poison: an element left unwritten fails the tolerance check
    run([t.clone() for t in inputs], outputs, dict(attrs))
    return outputs


def differing(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Flat positions where two outputs of one shape and dtype hold different values (NaN equals NaN)."""
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    unequal = flat_a != flat_b
    if a.is_floating_point():
        unequal &= ~(torch.isnan(flat_a) & torch.isnan(flat_b))
    return torch.nonzero(unequal).reshape(-1)


def verdict(task: Any, stress: StressSet, want: list[torch.Tensor], got: list[torch.Tensor]) -> dict[str, Any]:
    """`same`, `within` or `differs` (module docstring), with the mutant's largest error where it differs.

    Element by element: wherever the mutant's value differs from the unmutated kernel's, both must pass the
    task's tolerance check against the reference. So the mutant passes wherever the unmutated kernel does, and
    where the unmutated kernel fails (on NaN outside the contract, say) only the same value counts: a reference
    answer the task never promised is no ground to tell the two apart."""
    from kernelsage.tools.compare import compare_at
    from kernelsage.tools.judging.instances import dtype_name

    if all(same(a, b) for a, b in zip(want, got, strict=True)):
        return {"verdict": "same"}
    if task.custom_check is not None:  # the task's own precision rule judges the outputs together
        def passes(actual: list[torch.Tensor]) -> bool:
            return bool(task.custom_check(stress.case, stress.expected, tuple(actual)))
        if not passes(want):  # nothing but equal values vouches for the mutant here
            return {"verdict": "differs", "original_fails": True}
        return {"verdict": "within" if passes(got) else "differs"}
    largest = 0.0
    for index, (expected, a, b) in enumerate(zip(stress.expected, want, got, strict=True)):
        positions = differing(a, b)
        if not positions.numel():
            continue
        tolerance = task.tolerance(dtype_name(expected.dtype))
        if compare_at(expected.contiguous(), a, positions, tolerance, 0).n_mismatch:
            return {"verdict": "differs", "original_fails": True, "output": index}
        mine = compare_at(expected.contiguous(), b, positions, tolerance, 0)
        if mine.n_mismatch:
            return {"verdict": "differs", "output": index, "n_mismatch": mine.n_mismatch,
                    "n_elements": expected.numel(), "max_abs_error": mine.max_abs, "max_rel_error": mine.max_rel,
                    "atol": tolerance.atol, "rtol": tolerance.rtol}
        largest = max(largest, mine.max_abs)
    return {"verdict": "within", "max_abs_error": largest}


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
    for stress in stress_sets(task, job["seed"]):
        record: dict[str, Any] = {"set": stress.name, "outside": stress.outside}
        if stress.skipped:
            print(json.dumps({**record, "verdict": "skipped", "why": stress.skipped}), flush=True)
            continue
        try:
            want = outputs_of(original, stress.inputs, stress.expected, stress.attrs)
        except Exception as error:  # the unmutated kernel refuses this set (a size it does not support)
            print(json.dumps({**record, "verdict": "skipped", "why": str(error)[:200]}), flush=True)
            continue
        try:
            got = outputs_of(mutant, stress.inputs, stress.expected, stress.attrs)
        except Exception as error:
            print(json.dumps({**record, "verdict": "differs", "why": f"raised {error!s:.200}"}), flush=True)
            continue
        print(json.dumps({**record, **verdict(task, stress, want, got)}), flush=True)


if __name__ == "__main__":
    main()
