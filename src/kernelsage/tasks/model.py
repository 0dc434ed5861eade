"""The task model: one operator, its PyTorch reference, its test cases and its tolerances."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelsage.tasks.scaled_cases import Scaling
from kernelsage.tasks.tolerance import KERNELSAGE_RULE, Tolerance, ToleranceRule, describe_table, tightened

Scalar = int | float | bool | str | tuple[int, ...]
CustomCheck = Callable[["TestCase", tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]], bool]


@dataclass(frozen=True)
class TestCase:
    """One configuration of an operator: shape parameters, dtype and attributes, by name."""

    __test__ = False  # not a pytest class

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: str = "float32"

    def __getitem__(self, key: str) -> Any:
        return self.params[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)


TENSOR, TENSORS, NONE, ATTR, OTHER = "tensor", "tensors", "none", "attr", "other"  # kinds of Argument


@dataclass(frozen=True)
class Argument:
    """One argument of the reference as the suite passes it (forward's, in order): a tensor, a list of
    tensors, None (an optional input this case leaves out), a scalar attribute, or anything else; `names` are
    its tensors' names among the flat inputs (`CaseInstance.inputs`), or its attribute's name."""

    name: str
    kind: str  # TENSOR | TENSORS | NONE | ATTR | OTHER
    names: tuple[str, ...] = ()


@dataclass
class CaseInstance:
    """A test case made concrete: named input tensors, scalar attributes, and the reference bound to them.

    `inputs` is the flat view the kernel ABIs use (a list of tensors is one input per item); `arguments`,
    where the loader knows it, is the structure the suite's reference takes, and `returned` the reference as
    it returns (a tuple, a list, nested), which `reference` flattens into the kernel's outputs."""

    inputs: dict[str, torch.Tensor]
    attrs: dict[str, Scalar]
    reference: Callable[[], tuple[torch.Tensor, ...]]
    arguments: tuple[Argument, ...] = ()
    returned: Callable[[], Any] | None = None


@dataclass(frozen=True)
class TaskOrigin:
    """Where a task was loaded from, so that a worker process can load the same task again."""

    format: str  # "suite" | "kernelbench" | "npukernelbench"
    root: str  # the suite directory the id is relative to
    path: str  # the file or folder that defines the task
    scaling: Scaling | None = None  # the cases fitted to a byte budget (kernelsage.tasks.scaling), if any
    tolerance: Tolerance | None = None  # a run's stricter tolerance (kernelsage.tasks.tolerance), if any
    tolerance_rule: str | None = None  # which of the suite's rules judges it, where it has several (KernelBench)
    case: str = ""  # the one case this task is, where its suite makes a task per case (NPUKernelBench static mode)

    def __post_init__(self) -> None:
        if isinstance(self.scaling, Mapping):  # back from JSON (a worker's payload)
            object.__setattr__(self, "scaling", Scaling.from_dict(self.scaling))
        if isinstance(self.tolerance, Mapping):
            object.__setattr__(self, "tolerance", Tolerance(**self.tolerance))


@dataclass(frozen=True, kw_only=True)
class Task:
    """An operator to implement: semantics, interface, reference, test cases, tolerances, performance case."""

    id: str
    level: int
    category: str
    description: str
    cases: tuple[TestCase, ...]
    perf_case: TestCase
    instantiate: Callable[[TestCase, int], CaseInstance]
    tolerances: Mapping[str, Tolerance] = field(default_factory=dict)  # the task's own, over its suite's rule
    tolerance_rule: ToleranceRule = KERNELSAGE_RULE  # its suite's (kernelsage.tasks.tolerance)
    origin: TaskOrigin | None = None
    # The suite's own precision rule, replacing the element-wise tolerance check where a suite defines one
    # (NPUKernelBench's custom_check_precision): (case, expected outputs, actual outputs) -> passed.
    custom_check: CustomCheck | None = None
    # Where building one case draws more than that case (MultiKernelBench's input groups: every group at once),
    # the bytes of one such draw as the suite's files declare them, else None.
    draw_bytes: int | None = None

    def tolerance(self, dtype: str) -> Tolerance:
        """The tolerance for outputs of a dtype: the task's own, else its suite's rule (for a dtype the rule does
        not list, such as a float8 type, its float32 tolerance)."""
        table = self.tolerance_table()
        return table.get(dtype) or table["float32"]

    def tolerance_table(self) -> dict[str, Tolerance]:
        """Every dtype's tolerance: the suite's rule with the task's own over it."""
        return {**self.tolerance_rule.table(), **self.tolerances}

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id, "level": self.level, "category": self.category,
            "cases": [case.name for case in self.cases], "perf_case": self.perf_case.name,
            "description": self.description.strip().splitlines()[0] if self.description.strip() else "",
            "source": self.origin.path if self.origin else "",
        }


def with_tolerance(task: Task, tolerance: Tolerance) -> Task:
    """The task judged by a run's stricter `tolerance` for every dtype that is not exact (ConfigurationError
    where it is looser than the task's own rule), recorded in its origin so that a worker does the same."""
    table = tightened(task.tolerance_table(), tolerance, task_id=task.id, rule=task.tolerance_rule.suite)
    origin = dataclasses.replace(task.origin, tolerance=tolerance) if task.origin else None
    return dataclasses.replace(task, tolerances=table, origin=origin)


def tolerance_report(task: Task) -> dict[str, Any]:
    """How the task's outputs are judged (JSON-ready): the tolerance by dtype, the suite's rule it follows
    and where that comes from, a run's stricter tolerance if any, and whether the task's own check replaces
    the element-wise rule."""
    table = task.tolerance_table()
    stricter = task.origin.tolerance if task.origin else None
    rule = task.tolerance_rule
    text = f"{describe_table(table)} ({'stricter for this run than ' if stricter else ''}{rule.suite}'s rule: " \
           f"{rule.source})"
    if task.custom_check is not None:
        text = "the task's own custom_check_precision replaces the element-wise rule: " + text
    return {"rule": rule.suite, "rule_name": rule.name or None, "source": rule.source, "text": text,
            "by_dtype": {dtype: dataclasses.asdict(t) for dtype, t in table.items()},
            "stricter_for_this_run": dataclasses.asdict(stricter) if stricter else None,
            "custom_check": task.custom_check is not None}


def as_outputs(value: Any) -> tuple[torch.Tensor, ...]:
    """A reference's return value as a flat tuple of contiguous tensors (the kernel's outputs, in order)."""
    if isinstance(value, torch.Tensor):
        return (value.detach().contiguous(),)
    if isinstance(value, (tuple, list)):
        flat: list[torch.Tensor] = []
        for item in value:
            flat.extend(as_outputs(item))
        return tuple(flat)
    if isinstance(value, (bool, int, float)):
        return (torch.tensor(value),)
    raise TypeError(f"a reference returned {type(value).__name__}; expected tensors")


def define_task(
    *,
    id: str,
    level: int,
    category: str,
    description: str,
    reference: Callable[..., Any],
    inputs: Callable[[TestCase, torch.Generator], dict[str, torch.Tensor]],
    cases: Iterable[TestCase],
    perf: TestCase,
    attrs: Callable[[TestCase], dict[str, Scalar]] | None = None,
    tolerances: Mapping[str, Tolerance] | None = None,
) -> Task:
    """A task of our own suite format.

    `inputs(case, generator)` returns the named input tensors (drawn from `generator` so that a seed fixes
    them); `attrs(case)` the scalar attributes; `reference(*inputs, **attrs)` computes the outputs.
    """

    def instantiate(case: TestCase, seed: int) -> CaseInstance:
        generator = torch.Generator().manual_seed(seed)
        tensors = inputs(case, generator)
        attributes = attrs(case) if attrs else {}
        args = tuple(tensors.values())
        return CaseInstance(tensors, attributes, lambda: as_outputs(reference(*args, **attributes)),
                            returned=lambda: reference(*args, **attributes))

    return Task(
        id=id, level=level, category=category, description=description, cases=tuple(cases),
        perf_case=perf, instantiate=instantiate, tolerances=dict(tolerances or {}),
    )


def case(name: str, dtype: str = "float32", **params: Any) -> TestCase:
    """Shorthand for a TestCase: case("small", shape=(64, 128))."""
    return TestCase(name=name, params=params, dtype=dtype)
