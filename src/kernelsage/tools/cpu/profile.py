"""Profile: the candidate and the reference timed interleaved, by the judge's clock, on inputs the kernel has
never seen.

METHOD §8: 5 warm-ups, then 100 timed runs of each side. There are up to 4 input sets (`input_sets`: fewer,
never under 2, when one set's inputs are large), visited in a fresh random order every round, each with its
own place in the shared inputs. Every call gets fresh contents:

1. Each floating-point input of set s is rewritten as a random blend of two sets, lerp(set s, set p, w) with
   a fresh partner p and weight w in [0.25, 0.75] (`_Mixer`). A blend of two valid inputs stays valid for the
   usual constraints (signs, ranges, sorted rows, normalised rows, symmetric positive definite matrices), and
   every element changes, so no call repeats another's contents: an answer cached on the inputs' contents,
   their address, a sample of them or their shape never fits, and precomputing during warm-ups buys nothing.
2. The reference runs on those contents in the judge while the runner is frozen (SIGSTOP), so no thread of
   the candidate competes with it; its time is the judge's perf_counter around the call, and its output is
   this call's expected answer.
3. The contents are written to the shared inputs, the call's output slot (one whose previous content is
   another call's answer) is poisoned (small outputs in full, large ones at random positions), the runner is
   resumed and asked to run ks_kernel on set s. Its time runs from the request to the moment the runner is
   frozen again after its reply (so work its threads do after the reply is timed), minus the same interval
   for an empty request, calibrated before the library was loaded.
4. The checks wait until every thread is stopped and come before it runs again: the output in full on the
   first call and whenever it is small, else the poisoned positions must have been written and fresh random
   positions (8x as many on a set's first call) must match; the inputs at random positions. A failed check
   ends the profile with its class (partial_write for work done late or skipped, cached_result for another
   call's answer, wrong_result, nan_inf, input_modified).

Blending needs floating-point outputs only (integer outputs such as top-k indices jump where a blend brings two
values close, so an honest kernel could disagree with the reference on a near-tie), every non-floating input
equal across the sets, and a reference that reads the inputs it was made with (checked once: set 0 given set
1's inputs must give set 1's answer). Where that does not hold (e.g. random integer indices), the sets'
contents repeat: the reference and the candidate then alternate in
batches of 5 calls on the same sets, and once, at the start of a random round, the inputs of two sets trade
places in memory, so an answer keyed on an address is caught; an answer cached on the contents is not (see
docs/security.md).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import torch

from kernelsage.tasks.model import Task, TestCase
from kernelsage.tools.compare import (
    all_close,
    classify,
    compare_at,
    compare_output,
    gather,
    poison,
    poison_at,
)
from kernelsage.tools.cpu.arena import SLOT_ALIGNMENT, align
from kernelsage.tools.cpu.judge import (
    Emit,
    HarnessFailure,
    Judge,
    Prepared,
    case_seed,
    define_sets,
    instantiate,
    output_check,
    plan,
    run_reference,
)
from kernelsage.tools.cpu.runner import Runner, RunnerFailed
from kernelsage.tools.cpu.verdicts import OutputCheck
from kernelsage.tools.results import Status
from kernelsage.tools.timing import timing_from_samples

DEFAULT_SETS = 4  # at most; fewer (never under 2) when one set's inputs are large, see `input_sets`
INPUT_BUDGET = 32 << 20  # bytes of inputs the sets may take together before their number shrinks
SAMPLED = 1024  # positions poisoned before, and fresh positions checked after, each call on a large output
INPUT_SAMPLED = 256  # positions of each input checked unchanged after each call
SMALL_OUTPUT = 1 << 16  # outputs up to this many elements are poisoned and checked in full on every call
BATCH = 5  # calls of one side before the other's: each side mostly follows itself, drift hits both alike


class CheckFailed(Exception):
    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    judge = Judge(payload, emit)
    case = task.perf_case
    try:
        judge.phase("reference")
        first = instantiate(task, case, case_seed(payload["seed"], 0, 0))
        expected = run_reference(first, case)
        sets = input_sets(int(payload.get("sets", DEFAULT_SETS)), plan(task, [(first, None)], expected)[1])
        _, input_bytes, output_bytes = plan(task, [(first, None)] * sets, outputs_like=expected)
        slot = align(max(output_bytes, 1), SLOT_ALIGNMENT)
        runner = judge.start(input_bytes, slot * sets)  # it loads the library while the inputs are made
        judge.phase("reference")
        instances = [first] + [instantiate(task, case, case_seed(payload["seed"], k, 0)) for k in range(1, sets)]
        prepared, needed, _ = plan(task, [(i, None) for i in instances], outputs_like=expected)
        if needed > input_bytes:
            raise HarnessFailure(f"the inputs of the performance case {case.name!r} change shape with the seed")
        prepared[0].expected = expected
        judge.phase("harness")
        for item in prepared:
            judge.write_inputs(item)
        judge.phase("candidate")
        define_sets(runner, prepared)
        judge.phase("reference")
        mixer = _Mixer.build(prepared, case)
        data = _Timed(judge, runner, prepared, slot, payload, case, output_check(task, case), mixer)
        data.run(int(payload["warmup"]), int(payload["reps"]))
    except RunnerFailed as failure:
        emit({"kind": "result", "data": {"status": failure.status.value, "message": failure.message,
                                         "stderr_tail": judge.runner.log_tail() if judge.runner else ""}})
        return
    except CheckFailed as failure:
        emit({"kind": "result", "data": {"status": failure.status.value, "message": failure.message,
                                         "stderr_tail": judge.runner.log_tail() if judge.runner else ""}})
        return
    finally:
        judge.stop()
    emit({"kind": "result", "data": {
        "status": "ok", "case": case.name, "output_correct": True, "candidate": data.candidate.to_dict(),
        "reference": data.reference.to_dict(), "input_sets": sets, "round_trip_s": data.round_trip,
        "fresh_inputs": mixer is not None,
    }})


@dataclass
class _Call:
    """A candidate call awaiting its checks."""

    number: int
    set_id: int
    data: int
    slot: int
    code: int
    outputs: list[torch.Tensor]
    positions: list[torch.Tensor | None]
    expected: tuple[torch.Tensor, ...]


def input_sets(most: int, set_bytes: int) -> int:
    """How many input sets to rotate over: up to `most`, as many as fit INPUT_BUDGET, never fewer than 2.

    Two sets already defeat what rotation is for (an output slot always holds another set's answer, a
    skipped call leaves poison, the inputs' swap catches address-keyed caches); each further set costs its
    inputs' generation and reference, about 70 ms for a 2048 x 2048 float32 input on two cores.
    """
    return max(2, min(most, INPUT_BUDGET // max(set_bytes, 1)))


class _Mixer:
    """Fresh contents for every call: the floating inputs of a set blended with another set's."""

    def __init__(self, prepared: list[Prepared], mixable: list[int]) -> None:
        self.prepared, self.mixable = prepared, mixable
        self.base = [[item.inputs[k].clone() for k in mixable] for item in prepared]

    @classmethod
    def build(cls, prepared: list[Prepared], case: TestCase) -> _Mixer | None:
        """A mixer, or None where blending would not give the reference's answer for what the kernel sees."""
        first, others = prepared[0], prepared[1:]
        if first.expected is None or not all(e.is_floating_point() for e in first.expected):
            return None  # integer outputs (indices, counts) jump where a blend brings two values close
        mixable = [k for k, tensor in enumerate(first.inputs) if tensor.is_floating_point()
                   and any(not torch.equal(item.inputs[k], tensor) for item in others)]
        fixed = [k for k in range(len(first.inputs)) if k not in mixable]
        if not mixable or any(not torch.equal(bits(item.inputs[k]), bits(first.inputs[k]))
                              for item in others for k in fixed):
            return None
        mixer = cls(prepared, mixable)
        second = prepared[1]
        if second.expected is None:
            second.expected = run_reference(second.instance, case)
        mixer.blend(0, 1, 1.0)  # set 0 holding set 1's inputs must give set 1's answer
        got = run_reference(first.instance, case)
        mixer.blend(0, 1, 0.0)
        if len(got) != len(second.expected) or not all(
                all_close(e, g, tol) for e, g, tol in zip(second.expected, got, second.tolerances, strict=True)):
            return None  # the reference does not read the tensors it was made with
        return mixer

    def blend(self, s: int, partner: int, weight: float) -> None:
        """Set s's private inputs := lerp(set s, partner, weight), in place (the reference reads them)."""
        for j, k in enumerate(self.mixable):
            target, a, b = self.prepared[s].inputs[k], self.base[s][j], self.base[partner][j]
            if target.dtype in (torch.float32, torch.float64):
                torch.lerp(a, b, weight, out=target)
            else:
                target.copy_(torch.lerp(a.float(), b.float(), weight))


class _Timed:
    """The interleaved timing loop of one profile."""

    def __init__(self, judge: Judge, runner: Runner, prepared: list[Prepared], slot: int,
                 payload: dict[str, Any], case: TestCase, custom: OutputCheck | None = None,
                 mixer: _Mixer | None = None) -> None:
        self.judge, self.runner, self.prepared, self.slot, self.case = judge, runner, prepared, slot, case
        self.custom = custom  # the task's own precision rule, where it has one
        self.mixer = mixer
        self.answers: dict[int, tuple[int, tuple[torch.Tensor, ...]]] = {}  # per set: its last (call, answer)
        self.random = random.Random(payload["seed"])
        self.generator = torch.Generator().manual_seed(int(payload["seed"]))
        self.data_of = list(range(len(prepared)))  # which set's data sits at set s's input address
        self.slot_holds: list[int | None] = [None] * len(prepared)  # whose answer each slot last got
        self.slot_used = [-1] * len(prepared)
        self.seen = [False] * len(prepared)
        self.round_trip = 0.0

    def run(self, warmup: int, reps: int) -> None:
        """Alternate batches: the reference's calls on the next sets (runner frozen), then the candidate's on the
        same sets, each call checked before the runner may run again."""
        judge, runner, n = self.judge, self.runner, len(self.prepared)
        self.round_trip = runner.round_trip  # calibrated before the library was loaded
        runner.freeze()
        total = warmup + reps
        order = [s for _ in range(total // n + 1) for s in self.random.sample(range(n), n)][:total]
        if self.mixer is not None:
            self.run_fresh(order, warmup)
            return
        # at the start of a round followed by a whole round, so both traded sets are called after it
        swap_at = n * self.random.randrange(1, total // n) if total >= 2 * n else -1
        candidate, reference = [], []
        for start in range(0, total, BATCH):
            judge.phase("reference")
            for call in range(start, min(start + BATCH, total)):
                seconds = self.time_reference(self.data_of[order[call]])
                if call >= warmup:
                    reference.append(seconds)
            for call in range(start, min(start + BATCH, total)):
                judge.phase("harness")
                if call == swap_at:
                    self.swap_inputs()
                seconds = self.candidate_call(call, order[call])
                if call >= warmup:
                    candidate.append(max(seconds - self.round_trip, 1e-9))
        self.candidate = timing_from_samples(candidate, warmup=warmup)
        self.reference = timing_from_samples(reference, warmup=warmup)

    def run_fresh(self, order: list[int], warmup: int) -> None:
        """Call by call: fresh contents for set s, the reference on them (timed), then the candidate (timed)."""
        assert self.mixer is not None
        candidate, reference = [], []
        for call, s in enumerate(order):
            self.judge.phase("reference")
            partner = self.random.choice([p for p in range(len(self.prepared)) if p != s])
            self.mixer.blend(s, partner, self.random.uniform(0.25, 0.75))
            started = time.perf_counter()
            expected = run_reference(self.prepared[s].instance, self.case)
            seconds = time.perf_counter() - started
            self.judge.phase("harness")
            self.judge.write_inputs(self.prepared[s])
            candidate_seconds = self.candidate_call(call, s, expected)
            self.answers[s] = (call, expected)
            if call >= warmup:
                reference.append(seconds)
                candidate.append(max(candidate_seconds - self.round_trip, 1e-9))
        self.candidate = timing_from_samples(candidate, warmup=warmup)
        self.reference = timing_from_samples(reference, warmup=warmup)

    def candidate_call(self, call: int, s: int, expected: tuple[torch.Tensor, ...] | None = None) -> float:
        """One timed call on set s into a fresh slot, then its checks with the runner frozen; its time."""
        judge, runner = self.judge, self.runner
        data = self.data_of[s]
        if expected is None and self.prepared[data].expected is None:
            self.time_reference(data)
        expected = expected if expected is not None else self.prepared[data].expected
        assert expected is not None
        slot = self.choose_slot(call if self.mixer is not None else data, call)
        outputs = judge.output_views(self.prepared[data].output_places, slot * self.slot)
        positions = self.poison(outputs, call)
        judge.phase("candidate")
        runner.thaw()
        code, _ = runner.run(s, slot * self.slot)
        seconds = runner.freeze() - runner.sent_at  # up to the freeze: late work of its threads is timed
        judge.phase("compare")
        runner.settled()
        self.check(_Call(call, s, data, slot, code, outputs, positions, expected))
        return seconds

    def time_reference(self, data: int) -> float:
        item = self.prepared[data]
        started = time.perf_counter()
        outputs = run_reference(item.instance, self.case)
        seconds = time.perf_counter() - started
        if item.expected is None:
            item.expected = outputs
        return seconds

    def choose_slot(self, data: int, call: int) -> int:
        """The least recently used slot whose content is not this set's answer."""
        candidates = [b for b in range(len(self.slot_holds)) if self.slot_holds[b] != data]
        slot = min(candidates, key=lambda b: self.slot_used[b])
        self.slot_used[slot] = call
        self.slot_holds[slot] = data
        return slot

    def poison(self, outputs: list[torch.Tensor], call: int) -> list[torch.Tensor | None]:
        """Poison small outputs in full, large ones at random positions (returned; None: in full)."""
        positions: list[torch.Tensor | None] = []
        for output in outputs:
            if output.numel() <= SMALL_OUTPUT:
                poison(output, call)
                positions.append(None)
            else:
                chosen = self.positions(output, SAMPLED)
                poison_at(output, chosen, call)
                positions.append(chosen)
        return positions

    def positions(self, tensor: torch.Tensor, count: int) -> torch.Tensor:
        return torch.randint(0, max(tensor.numel(), 1), (min(count, max(tensor.numel(), 1)),),
                             generator=self.generator)

    def check(self, call: _Call) -> None:
        """The call's outputs: in full for the first call on the first set and for small outputs, else at the
        poisoned positions plus fresh random ones (many more on a set's first call); and its inputs."""
        where = f"call {call.number + 1} (input set {call.set_id})"
        if call.code != 0:
            raise CheckFailed(Status.RUNTIME_ERROR, f"ks_kernel returned {call.code} on {where}")
        item = self.prepared[call.data]
        first = not self.seen[call.data]
        self.seen[call.data] = True
        for index, (expected, output, tolerance, chosen) in enumerate(
                zip(call.expected, call.outputs, item.tolerances, call.positions, strict=True)):
            if chosen is None or (first and call.data == 0):
                if all_close(expected, output, tolerance):
                    continue
                comparison = compare_output(expected, output, tolerance, call.number, index)
            else:
                where_checked = torch.cat([chosen, self.positions(output, SAMPLED * (8 if first else 1))])
                if all_close(gather(expected, where_checked), gather(output, where_checked), tolerance):
                    continue
                comparison = compare_at(expected, output, where_checked, tolerance, call.number)
            status = classify([comparison])
            if status is Status.OK:
                continue
            if status is Status.PARTIAL_WRITE:
                raise CheckFailed(status, f"on {where} output {index} was not completely written during the "
                                          "call (work skipped, or finished after ks_kernel returned)")
            if self.stale(call, index, output):
                raise CheckFailed(Status.CACHED_RESULT, f"on {where} output {index} holds the answer for other "
                                                        "inputs (a previous call's output left in place, or an "
                                                        "answer cached across calls)")
            if self.custom is not None and self.custom(call.expected, call.outputs):
                break  # the suite's own rule accepts the outputs (it judges them all at once)
            raise CheckFailed(status, f"on {where} {comparison.n_mismatch} of {comparison.n_elements} checked "
                                      f"elements of output {index} are wrong")
        self.check_inputs([call.set_id])

    def stale(self, call: _Call, index: int, output: torch.Tensor) -> bool:
        """Does the output equal (at random positions) the answer of other inputs: another set's, or (with fresh
        contents) the last call's on any set (an answer replayed for an address or a set)?"""
        positions = self.positions(output, SAMPLED)
        others = [answer for number, answer in self.answers.values() if number != call.number] if self.mixer \
            else [item.expected for other, item in enumerate(self.prepared) if other != call.data]
        return output.numel() > 0 and any(answer is not None and classify(
            [compare_at(answer[index], output, positions, self.prepared[call.data].tolerances[index], -1)])
            is Status.OK for answer in others)

    def swap_inputs(self) -> None:
        """Trade the inputs of two sets in memory (the runner's addresses stay, their contents change)."""
        a, b = self.random.sample(range(len(self.prepared)), 2)
        assert self.judge.arena is not None
        for place_a, place_b in zip(self.prepared[a].input_places, self.prepared[b].input_places, strict=True):
            view_a = self.judge.arena.inputs.tensor(place_a.offset, place_a.dtype, place_a.shape)
            view_b = self.judge.arena.inputs.tensor(place_b.offset, place_b.dtype, place_b.shape)
            kept = view_a.clone()
            view_a.copy_(view_b)
            view_b.copy_(kept)
        self.data_of[a], self.data_of[b] = self.data_of[b], self.data_of[a]

    def check_inputs(self, sets: list[int]) -> None:
        """The shared inputs still hold the judge's private copies, at random positions after every call (the
        runner maps them read-only: this is the second line)."""
        assert self.judge.arena is not None
        for s in sets:
            owner = self.prepared[self.data_of[s]]
            for index, (place, private) in enumerate(zip(self.prepared[s].input_places, owner.inputs, strict=True)):
                view = self.judge.arena.inputs.tensor(place.offset, place.dtype, place.shape)
                chosen = self.positions(view, INPUT_SAMPLED)
                if view.numel() and not torch.equal(bits(gather(view, chosen)), bits(gather(private, chosen))):
                    name = list(owner.instance.inputs)[index]
                    raise CheckFailed(Status.INPUT_MODIFIED, f"the kernel modified its input {index} ({name})")


def bits(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as integers of its width (so NaN equals the same NaN)."""
    return tensor.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()])
