"""Profile: the candidate and the reference timed interleaved, by the judge's clock, on inputs the kernel has
never seen.

METHOD §8: 5 warm-ups, then 100 timed runs of each side. There are up to 4 input sets (`input_sets`: fewer,
never under 2, when one set's inputs are large), visited in a fresh random order every round, each with its
own place in the shared inputs.

1. Where the task allows it, every call gets fresh contents (`contents.FreshContents`): each floating input of
   set s blended with a random partner set, element by element with weights drawn once per profile and read
   through a window at a random offset (one scalar weight for an input whose structure an element-wise blend
   would break). No call repeats another's contents and none lies in a space a few answers span, so nothing
   kept from earlier calls (answers, a model of the blend) serves a later one.
2. Some timed calls, at random positions, get a whole instance made afresh by the task's own generator
   (`unseen_calls`): its output is checked, and a kernel clearly slower on them than on the others, relative
   to the reference, kept something that paid (`timing.slower_on_unseen`): cached_result. Fresh contents
   bound what kept state can do (no stored answers span a new call), not all of it (an element's values stay
   between its sets' values), so these calls come on every task.
3. The reference runs on the call's contents in the judge while the runner is frozen (SIGSTOP), so no thread of
   the candidate competes with it; its time is the judge's perf_counter around the call, and its output is
   this call's expected answer.
4. The contents are in set s's place in the shared inputs, written just before the call (fresh contents are
   blended there in place, the reference reading them while the runner is frozen; unseen ones, and repeated
   ones under REWRITE_BELOW or after something else sat there, are copied there from the judge's private
   copies), the call's output slot (one whose previous content is another call's answer) is poisoned (small
   outputs in full, large ones at random positions), the runner is resumed and asked to run ks_kernel on set s.
   Its time runs from the request to the moment the runner is frozen again after its reply (so work its threads
   do after the reply is timed), minus the same interval for an empty request, calibrated before the library
   was loaded.
5. The checks wait until every thread is stopped and come before it runs again: every output of every call,
   warm-ups and unseen instances included, is compared in full with the reference's answer for that call's own
   contents, and the inputs at random positions. A failed check ends the profile with its class (partial_write
   for work done late or skipped, cached_result for another call's answer, wrong_result, nan_inf,
   input_modified).

Nothing that decides a verdict may follow from what the kernel sees: instances come from generators keyed per
instance by a keyed hash of the job's key (`judge.case_seed`), and the order of the calls, which calls are unseen,
the blends and every sampled position come from the system's cryptographic generator (`tools.unpredictable`).
A kernel that rebuilds its inputs' generator learns only the inputs it already holds; and since no output is
checked by sample, there is no position to predict.

Blending needs floating-point outputs only (integer outputs such as top-k indices jump where a blend brings two
values close, so an honest kernel could disagree with the reference on a near-tie), every non-floating input
equal across the sets, and a reference that reads the inputs it was made with (checked once: set 0 given set
1's inputs must give set 1's answer). Where that does not hold (e.g. random integer indices), the sets' contents
repeat: the reference and the candidate then alternate in batches of 5 calls on the same sets, once, at the start
of a random round, two sets trade contents (an answer keyed on an address goes stale), and the unseen instances
are what keeps an answer cached on the contents from paying.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import torch

from kernelsage.tasks.model import Task
from kernelsage.tools import unpredictable
from kernelsage.tools.compare import (
    all_close,
    classify,
    compare_at,
    compare_output,
    gather,
    poison,
    poison_at,
)
from kernelsage.tools.cpu.judge import Judge, define_sets
from kernelsage.tools.cpu.runner import Runner
from kernelsage.tools.judging.arena import SLOT_ALIGNMENT, align
from kernelsage.tools.judging.contents import (
    DEFAULT_SETS,
    UNSEEN_TRIAL,
    FreshContents,
    bits,
    check_unseen,
    input_sets,
    unseen_calls,
    unseen_slowdown,
)
from kernelsage.tools.judging.core import CheckFailed, Emit, HarnessFailure, RunnerFailed
from kernelsage.tools.judging.instances import (
    Prepared,
    case_seed,
    instantiate,
    output_check,
    placed_like,
    plan,
    run_reference,
)
from kernelsage.tools.judging.verdicts import OutputCheck
from kernelsage.tools.results import Status
from kernelsage.tools.timing import TimedCall, timing_from_samples

SAMPLED = 1024  # positions poisoned before each call on a large output (and compared when telling a stale answer)
INPUT_SAMPLED = 256  # positions of each input checked unchanged after each call
SMALL_OUTPUT = 1 << 16  # outputs up to this many elements are poisoned in full before every call
BATCH = 5  # calls of one side before the other's on repeated contents: drift hits both alike
# Repeated contents smaller than this are written again before every call, as unseen instances are, so no call
# finds its inputs in another core's cache and others in its own (that would time unseen calls apart); larger
# ones cannot stay in a core's cache between calls anyway, and the copy would cost more than it evens out.
REWRITE_BELOW = 4 << 20


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    judge = Judge(payload, emit)
    case = task.perf_case
    seed = int(payload["seed"])
    try:
        judge.phase("reference")
        first = instantiate(task, case, case_seed(seed, 0, 0))
        expected = run_reference(first, case)
        set_bytes = plan(task, [(first, None)], expected)[1]
        sets = input_sets(int(payload.get("sets", DEFAULT_SETS)), set_bytes)
        _, input_bytes, output_bytes = plan(task, [(first, None)] * sets, outputs_like=expected)
        slot = align(max(output_bytes, 1), SLOT_ALIGNMENT)
        runner = judge.start(input_bytes, slot * sets)  # it loads the library while the inputs are made
        judge.phase("reference")
        instances = [first] + [instantiate(task, case, case_seed(seed, k, 0)) for k in range(1, sets)]
        prepared, needed, _ = plan(task, [(i, None) for i in instances], outputs_like=expected)
        if needed > input_bytes:
            raise HarnessFailure(f"the inputs of the performance case {case.name!r} change shape with the seed")
        prepared[0].expected = expected
        judge.phase("candidate")
        define_sets(runner, prepared)
        judge.phase("reference")
        contents = FreshContents.build(prepared, case)
        if contents is not None:
            judge.phase("harness")
            shared = [judge.write_inputs(item) for item in prepared]
            judge.phase("reference")
            contents.bind(shared, case)  # blends written where the runner and the reference read, where it can
        unseen = min(unseen_calls(set_bytes), int(payload["reps"]))
        timed = _Timed(judge, runner, prepared, slot, seed, task, output_check(task, case), contents)
        timed.run(int(payload["warmup"]), int(payload["reps"]), unseen)
        if unseen_slowdown(timed.timed_calls) is not None:
            # A burst of load on a shared machine can land on the unseen calls once; a kernel that keeps state pays
            # on them in every pass. The verdict and the times are a second, independent pass's.
            timed.run(int(payload["warmup"]), int(payload["reps"]), unseen)
        check_unseen(timed.timed_calls)
    except (RunnerFailed, CheckFailed) as failure:
        emit({"kind": "result", "data": {"status": failure.status.value, "message": failure.message,
                                         "stderr_tail": judge.runner.log_tail() if judge.runner else ""}})
        return
    finally:
        judge.stop()
    emit({"kind": "result", "data": {
        "status": "ok", "case": case.name, "output_correct": True, "candidate": timed.candidate.to_dict(),
        "reference": timed.reference.to_dict(), "input_sets": sets, "round_trip_s": timed.round_trip,
        "fresh_inputs": contents is not None, "unseen_calls": unseen,
        "contents": "repeated" if contents is None else "elementwise" if contents.elementwise else "whole",
    }})


@dataclass
class _Call:
    """One timed call: where its inputs live (set s's place), what they hold, and its reference's verdict."""

    number: int
    set_id: int
    item: Prepared  # the contents the call sees, with set s's input places
    expected: tuple[torch.Tensor, ...]
    reference_s: float
    data: int  # which input set's contents (-1: an unseen instance)
    inputs_before: list[tuple[torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=list)
    slot: int = 0
    code: int = 0
    outputs: list[torch.Tensor] = dataclasses.field(default_factory=list)
    placed: bool = False  # an unseen instance already written to set s's place (its reference read it there)


class _Timed:
    """The interleaved timing loop of one profile."""

    def __init__(self, judge: Judge, runner: Runner, prepared: list[Prepared], slot: int, seed: int, task: Task,
                 custom: OutputCheck | None = None, contents: FreshContents | None = None) -> None:
        self.judge, self.runner, self.prepared, self.slot, self.task = judge, runner, prepared, slot, task
        self.case = task.perf_case
        self.seed = seed
        self.custom = custom  # the task's own precision rule, where it has one
        self.contents = contents
        self.answers: dict[int, tuple[int, tuple[torch.Tensor, ...]]] = {}  # per place: its last (call, answer)
        self.random = unpredictable.SYSTEM  # nothing a kernel sees or infers predicts the order, unseen calls, blends
        self.data_of = list(range(len(prepared)))  # which set's data set s's calls see
        self.slot_holds: list[int | None] = [None] * len(prepared)  # whose answer each slot last got
        self.slot_used = [-1] * len(prepared)
        self.unseen_made = 0
        self.calls_made = 0  # across passes: call numbers, slots and poison never repeat an earlier pass's
        self.place_holds: list[int | None] = [None] * len(prepared)  # which set's contents each place holds now
        self.rewrite = sum(t.numel() * t.element_size() for t in prepared[0].inputs) < REWRITE_BELOW
        self.round_trip = 0.0
        self.timed_calls: list[TimedCall] = []  # what the unseen-instance rule reads

    def run(self, warmup: int, reps: int, unseen: int) -> None:
        """Reference and candidate on the same contents, checked before the runner may run again: call by call
        where every call has fresh contents, else in batches (reference's calls, then the candidate's on the
        same sets). `unseen` timed calls, at random positions, get an instance no call had. A second run is a
        new pass: its calls are numbered after the first's, and the times and calls kept are its own."""
        judge, n = self.judge, len(self.prepared)
        self.round_trip = self.runner.round_trip  # calibrated before the library was loaded
        self.runner.freeze()
        total = warmup + reps
        order = [s for _ in range(total // n + 1) for s in self.random.sample(range(n), n)][:total]
        unseen_at = set(self.random.sample(range(warmup, total), unseen))
        batch = 1 if self.contents is not None else BATCH
        # repeated contents: at the start of a round followed by a whole round, two sets trade contents
        swap_at = n * self.random.randrange(1, total // n) if self.contents is None and total >= 2 * n else -1
        first, self.calls_made = self.calls_made, self.calls_made + total
        candidate, reference, timed_calls = [], [], []
        for start in range(0, total, batch):
            calls = []
            for number in range(start, min(start + batch, total)):
                judge.phase("harness")
                if number == swap_at:
                    self.data_of[:] = self.swapped()
                calls.append(self.reference_call(first + number, order[number], number in unseen_at))
            for call in calls:
                seconds = max(self.candidate_call(call) - self.round_trip, 1e-9)
                if call.number - first >= warmup:
                    candidate.append(seconds)
                    reference.append(call.reference_s)
                    timed_calls.append(TimedCall(call.number, seconds, call.reference_s, unseen=call.data < 0))
        self.timed_calls = timed_calls
        self.candidate = timing_from_samples(candidate, warmup=warmup)
        self.reference = timing_from_samples(reference, warmup=warmup)

    def reference_call(self, number: int, s: int, unseen: bool) -> _Call:
        """The contents call `number` will see on set s, and the reference on them (timed)."""
        placed = False
        if unseen:
            item, data = self.unseen_instance(s), -1
            if self.contents is not None and self.contents.bound:
                placed = self.place_unseen(item)
        else:
            data = self.data_of[s]
            if self.contents is not None:
                self.contents.blend(s, self.contents.draw(s))
            item = dataclasses.replace(self.prepared[data], input_places=self.prepared[s].input_places)
        self.judge.phase("reference")
        started = time.perf_counter()
        expected = run_reference(item.instance, self.case)
        seconds = time.perf_counter() - started
        if self.contents is None and data >= 0 and self.prepared[data].expected is None:
            self.prepared[data].expected = expected  # a repeated set's answer, for the stale check
        return _Call(number, s, item, expected, seconds, data, placed=placed)

    def place_unseen(self, item: Prepared) -> bool:
        """Write an unseen instance where set s's inputs live and make its reference read them there, as a seen
        call's reference reads its blend: the reference then warms the memory the kernel reads next alike on both
        kinds of call (an instance written just before the kernel ran left it 1.7-1.9x slower, relative to the
        reference, on unseen calls than on the others: honest kernels flagged). False where a tensor is not the
        one the reference holds (a non-contiguous input was copied)."""
        tensors = list(item.instance.inputs.values())
        if any(private is not held for private, held in zip(item.inputs, tensors, strict=True)):
            return False
        self.judge.phase("harness")
        for tensor, view in zip(tensors, self.judge.write_inputs(item), strict=True):
            tensor.set_(view)
        return True

    def unseen_instance(self, s: int) -> Prepared:
        """A whole new instance of the case, placed where set s's inputs live."""
        self.judge.phase("reference")
        instance = instantiate(self.task, self.case, case_seed(self.seed, UNSEEN_TRIAL + self.unseen_made, 0))
        self.unseen_made += 1
        return placed_like(self.task, instance, self.prepared[s])

    def candidate_call(self, call: _Call) -> float:
        """The call's contents written to set s's place, one timed call into a fresh slot, then its checks with
        the runner frozen; its time."""
        judge, runner = self.judge, self.runner
        judge.phase("harness")
        if (call.data < 0 and not call.placed) or (self.contents is not None and not self.contents.bound) or (
                self.contents is None and (self.rewrite or self.place_holds[call.set_id] != call.data)):
            judge.write_inputs(call.item)  # bound fresh contents were blended in place just now
        self.place_holds[call.set_id] = call.data
        call.inputs_before = self.inputs_sample(call.item)
        # whose answer the slot will hold: a call's own with fresh contents, an unseen instance's, or a set's
        owner = call.number if self.contents is not None else -1 - call.number if call.data < 0 else call.data
        call.slot, holds_answer = self.choose_slot(owner, call.number)
        call.outputs = judge.output_views(call.item.output_places, call.slot * self.slot)
        self.poison(call.outputs, call.number, whole=holds_answer)
        judge.phase("candidate")
        runner.thaw()
        call.code, _ = runner.run(call.set_id, call.slot * self.slot)
        seconds = runner.freeze() - runner.sent_at  # up to the freeze: late work of its threads is timed
        judge.phase("compare")
        runner.settled()
        self.check(call)
        self.answers[call.set_id] = (call.number, call.expected)
        if call.data < 0 and self.contents is not None:
            self.contents.restore(call.set_id)  # the unseen instance overwrote the set's inputs
        return seconds

    def swapped(self) -> list[int]:
        """data_of with two sets' contents traded: an answer kept for an address, a set or a slot goes stale."""
        a, b = self.random.sample(range(len(self.prepared)), 2)
        data_of = list(self.data_of)
        data_of[a], data_of[b] = data_of[b], data_of[a]
        return data_of

    def choose_slot(self, owner: int, call: int) -> tuple[int, bool]:
        """The least recently used slot whose content is not this owner's answer, and whether every slot held
        it (unseen instances taking slots can leave all of them with one set's answer: then it is poisoned whole)."""
        candidates = [b for b in range(len(self.slot_holds)) if self.slot_holds[b] != owner]
        slot = min(candidates or range(len(self.slot_holds)), key=lambda b: self.slot_used[b])
        self.slot_used[slot] = call
        self.slot_holds[slot] = owner
        return slot, not candidates

    def poison(self, outputs: list[torch.Tensor], call: int, whole: bool = False) -> None:
        """Poison small outputs in full, large ones at random positions: an element still holding it after the
        call tells work skipped or left late (partial_write) from a wrong answer. The check is in full either way."""
        for output in outputs:
            if whole or output.numel() <= SMALL_OUTPUT:
                poison(output, call)
            else:
                poison_at(output, self.positions(output, SAMPLED), call)

    def positions(self, tensor: torch.Tensor, count: int) -> torch.Tensor:
        return unpredictable.positions(min(count, tensor.numel()), tensor.numel())

    def check(self, call: _Call) -> None:
        """Every output in full against the reference's answer for this call's own contents (no position a kernel
        could predict decides anything), then the inputs."""
        where = f"call {call.number + 1} (input set {call.set_id}{', an unseen instance' if call.data < 0 else ''})"
        if call.code != 0:
            raise CheckFailed(Status.RUNTIME_ERROR, f"ks_kernel returned {call.code} on {where}")
        for index, (expected, output, tolerance) in enumerate(
                zip(call.expected, call.outputs, call.item.tolerances, strict=True)):
            if all_close(expected, output, tolerance):
                continue
            comparison = compare_output(expected, output, tolerance, call.number, index)
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
            raise CheckFailed(status, f"on {where} {comparison.n_mismatch} of {comparison.n_elements} "
                                      f"elements of output {index} are wrong")
        self.check_inputs(call)

    def stale(self, call: _Call, index: int, output: torch.Tensor) -> bool:
        """Does the output equal (at random positions) the answer of other inputs: the last call's at any set's
        place (unseen instances included), or another set's (an answer replayed for an address or a set)?"""
        positions = self.positions(output, SAMPLED)
        others = [answer for number, answer in self.answers.values() if number != call.number]
        if self.contents is None:
            others += [item.expected for other, item in enumerate(self.prepared) if other != call.data]
        return output.numel() > 0 and any(answer is not None and classify(
            [compare_at(answer[index], output, positions, call.item.tolerances[index], -1)])
            is Status.OK for answer in others)

    def inputs_sample(self, item: Prepared) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Random positions of every input and what the judge wrote there, taken before the call."""
        assert self.judge.arena is not None
        sample = []
        for place in item.input_places:
            view = self.judge.arena.inputs.tensor(place.offset, place.dtype, place.shape)
            chosen = self.positions(view, INPUT_SAMPLED)
            sample.append((chosen, bits(gather(view, chosen)).clone() if view.numel() else chosen))
        return sample

    def check_inputs(self, call: _Call) -> None:
        """The shared inputs still hold, at positions the kernel could not know, what they held before the call
        (the runner maps them read-only: this is the second line)."""
        assert self.judge.arena is not None
        for index, (place, (chosen, before)) in enumerate(zip(call.item.input_places, call.inputs_before,
                                                              strict=True)):
            view = self.judge.arena.inputs.tensor(place.offset, place.dtype, place.shape)
            if view.numel() and not torch.equal(bits(gather(view, chosen)), before):
                name = list(call.item.instance.inputs)[index]
                raise CheckFailed(Status.INPUT_MODIFIED, f"the kernel modified its input {index} ({name})")
