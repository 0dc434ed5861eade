"""Fresh contents for every timed call of a profile: each floating input blended anew from two input sets.

A blend with one scalar weight per tensor keeps every call's inputs in a tiny affine space: a kernel that keeps
state could learn it from its first calls and then answer later calls from stored answers (exactly, for any
output that is a low-degree polynomial of its inputs: sums, losses, matmuls). So inputs are blended element by
element: x = lerp(set s, set p, W), with W a window, at a random offset, into one tensor of random weights in
[0.25, 0.75] drawn once per profile. Weights, offsets and partners come from the system's cryptographic generator
(`tools.unpredictable`): no seed the kernel could rebuild from what it sees predicts the next call's blend. Every element then moves independently; computing an output from earlier
answers costs as much as computing it, and a call repeats another's weights with probability 1/OFFSETS.

An element-wise blend of two valid inputs stays valid for box constraints (signs, ranges, zeros where both sets
have them, e.g. triangular matrices), and one offset per call keeps element-wise relations between inputs of one
shape (x >= y where both sets have it). It breaks relations inside one input: symmetric matrices, sorted rows,
rows normalised to one sum or norm, integer values held in a floating type. An input that shows one of those in
every set is blended with one scalar weight instead (`blend_kind`), which keeps them; the profile then also
slips unseen instances into the timed calls (profile.py), since that input alone is interpolable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kernelsage.tasks.model import TestCase
from kernelsage.tools import unpredictable
from kernelsage.tools.compare import all_close
from kernelsage.tools.judging.core import CheckFailed
from kernelsage.tools.judging.instances import Prepared, run_reference
from kernelsage.tools.results import Status
from kernelsage.tools.timing import MIN_UNSEEN, TimedCall, call_ratios, slower_on_unseen

WEIGHT_LOW, WEIGHT_HIGH = 0.25, 0.75
OFFSETS = 1 << 16  # distinct windows into the weights
ELEMENTWISE, WHOLE = "elementwise", "whole"
NORMALISED_RTOL = 1e-3
PREFIX = 4096  # elements a structure check reads before deciding to read them all
DEFAULT_SETS = 4  # at most; fewer (never under 2) when one set's inputs are large, see `input_sets`
INPUT_BUDGET = 32 << 20  # bytes of inputs the sets may take together before their number shrinks
UNSEEN_BUDGET = 32 << 20  # bytes of inputs the unseen instances of one profile may take together
MOST_UNSEEN = 16
UNSEEN_TRIAL = 1000  # seeds of unseen instances: case_seed(seed, UNSEEN_TRIAL + j, 0), apart from the sets'


def blend_kind(values: Sequence[torch.Tensor]) -> str:
    """ELEMENTWISE, or WHOLE where every set shows a structure an element-wise blend would break."""
    structures = (_integral, _symmetric, _sorted_rows, _normalised_rows)
    return WHOLE if any(all(shows(t) for t in values) for shows in structures) else ELEMENTWISE


def _integral(tensor: torch.Tensor) -> bool:
    head = tensor.reshape(-1)[:PREFIX]  # most inputs fail within their first elements: no pass over the whole
    if not torch.equal(head, torch.round(head)):
        return False
    return tensor.numel() > 0 and bool(torch.any(tensor != 0)) and torch.equal(tensor, torch.round(tensor))


def _symmetric(tensor: torch.Tensor) -> bool:
    if tensor.dim() < 2 or tensor.shape[-1] != tensor.shape[-2] or tensor.shape[-1] < 2:
        return False
    corner = tensor[..., :4, :4]
    return torch.equal(corner, corner.transpose(-1, -2)) and torch.equal(tensor, tensor.transpose(-1, -2))


def _sorted_rows(tensor: torch.Tensor) -> bool:
    if tensor.dim() < 1 or tensor.shape[-1] < 3:
        return False
    def monotone(rows: torch.Tensor) -> bool:
        steps = torch.diff(rows.float(), dim=-1)
        return bool(torch.all(steps >= 0)) or bool(torch.all(steps <= 0))

    return monotone(tensor.reshape(-1, tensor.shape[-1])[:1]) and monotone(tensor)


def _normalised_rows(tensor: torch.Tensor) -> bool:
    if tensor.dim() < 1 or tensor.shape[-1] < 2 or tensor.numel() == tensor.shape[-1]:
        return False  # a single row has one sum: nothing to tell a normalisation from chance
    def one_measure(rows: torch.Tensor) -> bool:
        for measure in (rows.sum(-1), rows.norm(dim=-1)):
            if float(measure.abs().max()) > 0 and float((measure - measure[0]).abs().max()) \
                    <= NORMALISED_RTOL * float(measure[0].abs()):
                return True
        return False

    rows = tensor.float().reshape(-1, tensor.shape[-1])
    return one_measure(rows[:2]) and one_measure(rows)  # two rows already tell most inputs apart


def input_sets(most: int, set_bytes: int) -> int:
    """How many input sets to rotate over: up to `most`, as many as fit INPUT_BUDGET, never fewer than 2.

    Two sets already defeat what rotation is for (an output slot always holds another set's answer, a
    skipped call leaves poison, the inputs' swap catches address-keyed caches); each further set costs its
    inputs' generation and reference, about 70 ms for a 2048 x 2048 float32 input on two cores.
    """
    return max(2, min(most, INPUT_BUDGET // max(set_bytes, 1)))


def unseen_calls(set_bytes: int) -> int:
    """How many timed calls get a whole instance no call had: enough for `slower_on_unseen` to tell (at least
    MIN_UNSEEN, more while their inputs fit UNSEEN_BUDGET). Element-wise blends too: each element still moves
    only between its sets' values, and bounds learned per element over early calls let a reduction such as a
    row maximum skip most of its reads (a 2-3.6x gain measured, tests/tools/test_attacks_state.py).
    """
    return max(MIN_UNSEEN, min(MOST_UNSEEN, UNSEEN_BUDGET // max(set_bytes, 1)))


def unseen_slowdown(calls: Sequence[TimedCall]) -> float | None:
    """How much slower, relative to the reference, the kernel was on the unseen instances than on the other timed
    calls, when clearly so; else None."""
    return slower_on_unseen(*call_ratios(calls))


def check_unseen(calls: Sequence[TimedCall]) -> None:
    """CheckFailed(cached_result) when the kernel was clearly slower, relative to the reference, on the unseen
    instances than on the other timed calls: it kept something from earlier calls that paid, so its time is not
    credited (both profiles, cpu and device, judge by this rule)."""
    slowdown = unseen_slowdown(calls)
    if slowdown is not None:
        _, unseen = call_ratios(calls)
        raise CheckFailed(Status.CACHED_RESULT, (
            f"the kernel was {slowdown:.1f}x slower, relative to the reference, on the {len(unseen)} timed calls "
            "with inputs no call had before than on the others: it reuses work kept from earlier calls, so its "
            "time does not measure the task"))


@dataclass(frozen=True)
class Draw:
    """One call's blend: the partner set, the weights' window offset, the scalar weight of WHOLE inputs."""

    partner: int
    offset: int
    weight: float


class FreshContents:
    """Blends the floating inputs of a set with another set's, in place in the set's private inputs."""

    def __init__(self, prepared: list[Prepared], mixable: list[int], kinds: list[str]) -> None:
        self.prepared, self.mixable, self.kinds = prepared, mixable, kinds
        self.base = [[item.inputs[k].clone() for k in mixable] for item in prepared]
        self.bound = False  # whether the sets' private inputs are the shared ones (`bind`)
        self.fixed = [[item.inputs[k].clone() for k in range(len(item.inputs)) if k not in mixable]
                      for item in prepared]
        longest = max(prepared[0].inputs[k].numel() for k in mixable)
        self.weights = {torch.float32: unpredictable.uniform(longest + OFFSETS, WEIGHT_LOW, WEIGHT_HIGH)}
        if any(prepared[0].inputs[k].dtype == torch.float64 for k in mixable):
            self.weights[torch.float64] = self.weights[torch.float32].double()

    @property
    def elementwise(self) -> bool:
        """Every blended input moves element by element (none is interpolable from a few answers)."""
        return all(kind == ELEMENTWISE for kind in self.kinds)

    @classmethod
    def build(cls, prepared: list[Prepared], case: TestCase) -> FreshContents | None:
        """Fresh contents for these sets, or None where blending would not give the reference's answer for what
        the kernel sees (the calls then repeat the sets' contents)."""
        first, others = prepared[0], prepared[1:]
        if first.expected is None or not all(e.is_floating_point() for e in first.expected):
            return None  # integer outputs (indices, counts) jump at near-ties a blend can make
        mixable = [k for k, tensor in enumerate(first.inputs) if tensor.is_floating_point()
                   and any(not torch.equal(item.inputs[k], tensor) for item in others)]
        fixed = [k for k in range(len(first.inputs)) if k not in mixable]
        if not mixable or any(not torch.equal(bits(item.inputs[k]), bits(first.inputs[k]))
                              for item in others for k in fixed):
            return None
        kinds = [blend_kind([item.inputs[k] for item in prepared]) for k in mixable]
        contents = cls(prepared, mixable, kinds)
        if not contents.reads_its_inputs(case):
            return None  # the reference does not read the tensors it was made with
        return contents

    def draw(self, s: int) -> Draw:
        """Set s's next blend, from the system's cryptographic generator."""
        rng = unpredictable.SYSTEM
        partner = rng.choice([p for p in range(len(self.prepared)) if p != s])
        return Draw(partner, rng.randrange(OFFSETS), rng.uniform(WEIGHT_LOW, WEIGHT_HIGH))

    def blend(self, s: int, draw: Draw) -> None:
        """Set s's private inputs := lerp(set s, the partner, the draw's weights), in place (the reference reads
        them)."""
        for j, k in enumerate(self.mixable):
            target, a, b = self.prepared[s].inputs[k], self.base[s][j], self.base[draw.partner][j]
            work = target.dtype if target.dtype in self.weights else torch.float32
            if self.kinds[j] == ELEMENTWISE:
                weight: torch.Tensor | float = self.weights[work][draw.offset:draw.offset + target.numel()] \
                    .view(target.shape)
            else:
                weight = draw.weight
            if work == target.dtype:
                torch.lerp(a, b, weight, out=target)
            else:
                target.copy_(torch.lerp(a.to(work), b.to(work), weight))

    def bind(self, shared: list[list[torch.Tensor]], case: TestCase) -> None:
        """Make every set's private inputs the shared ones the runner reads, storage and all, where the reference
        then still reads what the blend writes: the blend writes where the kernel reads (no copy per call).
        Safe because every call blends its whole inputs anew while the runner is frozen, before the reference
        runs: nothing the kernel did to them (the runner maps them read-only) can reach it. A reference that
        reads other views of the old storage (checked: set 0 given set 1's inputs must give set 1's answer)
        keeps its private inputs, and `bound` stays False: each call must then copy them."""
        kept = [[tensor.detach() for tensor in item.inputs] for item in self.prepared]
        for item, views in zip(self.prepared, shared, strict=True):
            for tensor, view in zip(item.inputs, views, strict=True):
                tensor.set_(view)
        self.bound = self.reads_its_inputs(case)
        if not self.bound:
            for item, old in zip(self.prepared, kept, strict=True):
                for tensor, storage in zip(item.inputs, old, strict=True):
                    tensor.set_(storage)

    def reads_its_inputs(self, case: TestCase) -> bool:
        """Does set 0's reference, given set 1's inputs, give set 1's answer?"""
        first, second = self.prepared[0], self.prepared[1]
        if second.expected is None:
            second.expected = run_reference(second.instance, case)
        self.take(0, 1)
        got = run_reference(first.instance, case)
        self.take(0, 0)
        return len(got) == len(second.expected) and all(
            all_close(e, g, tol) is True for e, g, tol in zip(second.expected, got, second.tolerances, strict=True))

    def restore(self, s: int) -> None:
        """Set s's inputs that are not blended, back from the judge's copies (after something else sat there)."""
        fixed = [k for k in range(len(self.prepared[s].inputs)) if k not in self.mixable]
        for k, kept in zip(fixed, self.fixed[s], strict=True):
            self.prepared[s].inputs[k].copy_(kept)

    def take(self, s: int, source: int) -> None:
        """Set s's private inputs := set `source`'s own (unblended) contents."""
        for j, k in enumerate(self.mixable):
            self.prepared[s].inputs[k].copy_(self.base[source][j])


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as integers of its width (so NaN equals the same NaN)."""
    return tensor.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()])
