"""A mining run: for each known-good kernel, check it, ask for its rewinds, judge each by the real evaluator, and
store the removals that measurably hurt as cold experiences; resumable through the run's ledger."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelsage.errors import ModelError
from kernelsage.graph.nodes.model_calls import text_of
from kernelsage.memory_backend.store import Memory
from kernelsage.mining.ledger import Ledger
from kernelsage.mining.lesson import lesson_item
from kernelsage.mining.proposals import Variant, parse_variants, proposal_messages
from kernelsage.mining.sources import KnownKernel
from kernelsage.mining.verdict import Judgement, judge_removal
from kernelsage.models.retry import invoke_with_retry
from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend, files_to_write
from kernelsage.tools.evaluator import evaluate_candidate, profile_again

# One variant costs its own evaluation and the original's profile beside it: it starts only when both fit.
EVALUATIONS_PER_VARIANT = 2


@dataclass
class VariantResult:
    optimization: str
    judgement: Judgement
    item_id: int | None = None
    resumed: bool = False  # judged by an earlier process of this run

    def to_dict(self) -> dict[str, Any]:
        return {"optimization": self.optimization, **self.judgement.to_dict(), "item_id": self.item_id,
                "resumed": self.resumed}


@dataclass
class KernelReport:
    task_id: str
    source_sha256: str
    origin: str
    problem: str = ""  # why the kernel was not mined ('' when it was)
    unread: list[str] = field(default_factory=list)  # answer sections that could not be read
    proposed: int = 0
    variants: list[VariantResult] = field(default_factory=list)

    @property
    def correct(self) -> int:
        return sum(v.judgement.correct for v in self.variants)

    @property
    def kept(self) -> list[VariantResult]:
        return [v for v in self.variants if v.judgement.kept]

    @property
    def discarded(self) -> list[VariantResult]:
        return [v for v in self.variants if not v.judgement.kept]

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "source_sha256": self.source_sha256, "origin": self.origin,
                "problem": self.problem, "unread": self.unread, "proposed": self.proposed,
                "judged": len(self.variants), "correct": self.correct, "kept": len(self.kept),
                "discarded": len(self.discarded), "variants": [v.to_dict() for v in self.variants]}


@dataclass
class MiningReport:
    kernels: list[KernelReport] = field(default_factory=list)
    evaluations: int = 0  # evaluations this process ran (a resumed run counts only its own)
    budget: int | None = None
    out_of_budget: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"evaluations": self.evaluations, "budget": self.budget, "out_of_budget": self.out_of_budget,
                "lessons": sum(len(k.kept) for k in self.kernels), "kernels": [k.to_dict() for k in self.kernels]}


@dataclass
class Miner:
    """What a run mines with: the backend that judges, the model that proposes, the memory lessons go to."""

    backend: KernelBackend
    model: Any
    memory: Memory
    ledger: Ledger
    budget: int | None = None  # evaluations this process may run (None: no limit)
    variants: int = 4  # variants asked for per kernel
    on_event: Callable[[str], None] = lambda line: None

    def mine(self, kernels: Sequence[KnownKernel], tasks: Mapping[str, Task]) -> MiningReport:
        """Mine every kernel in turn; stops starting evaluations once the budget is spent."""
        report = MiningReport(budget=self.budget)
        for kernel in kernels:
            found = KernelReport(kernel.task_id, kernel.sha256, kernel.origin)
            report.kernels.append(found)
            task = tasks.get(kernel.task_id)
            if task is None:
                found.problem = f"no task {kernel.task_id!r} in the suite"
            else:
                self._mine_kernel(kernel, task, found, report)
            if found.problem:
                self.on_event(f"{kernel.task_id}: not mined: {found.problem}")
        return report

    def _affords(self, report: MiningReport, cost: int) -> bool:
        if self.budget is None or report.evaluations + cost <= self.budget:
            return True
        report.out_of_budget = True
        return False

    def _mine_kernel(self, kernel: KnownKernel, task: Task, found: KernelReport, report: MiningReport) -> None:
        problem = self.ledger.original(kernel)
        if problem is None:
            if not self._affords(report, 1):
                found.problem = "out of evaluation budget"
                return
            report.evaluations += 1
            checked = evaluate_candidate(self.backend, task, kernel.files)
            problem = "" if checked.correct else f"the known-good kernel is not correct here ({checked.status.value})"
            self.ledger.record_original(kernel, problem)
            self.on_event(f"{kernel.task_id}: the original kernel: {problem or 'correct'}")
        if problem:
            found.problem = problem
            return
        proposals = self._proposals(kernel, task, found)
        if proposals is None:
            return
        found.proposed = len(proposals)
        for variant in proposals:
            result = self._judge(kernel, task, variant, report)
            if result is None:
                found.problem = "out of evaluation budget"
                return
            found.variants.append(result)

    def _proposals(self, kernel: KnownKernel, task: Task, found: KernelReport) -> list[Variant] | None:
        earlier = self.ledger.proposals(kernel)
        if earlier is not None:
            variants, found.unread = earlier
            return variants
        try:
            answer = invoke_with_retry(self.model, proposal_messages(task, kernel, self.variants))
        except ModelError as exc:  # not recorded: a rerun asks again
            found.problem = f"the model failed: {exc}"
            return None
        names = files_to_write(self.backend, task)
        variants, found.unread = parse_variants(text_of(answer), names)
        variants = _distinct(variants, kernel, found.unread)
        self.ledger.record_proposals(kernel, variants, found.unread)
        self.on_event(f"{kernel.task_id}: {len(variants)} variants proposed"
                      + (f" ({len(found.unread)} unreadable: {'; '.join(found.unread)})" if found.unread else ""))
        return variants

    def _judge(self, kernel: KnownKernel, task: Task, variant: Variant, report: MiningReport) -> VariantResult | None:
        earlier = self.ledger.judgement(kernel, variant)
        if earlier is not None:
            judgement, item_id = earlier
            if judgement.kept and item_id is None:  # judged, then stopped before the lesson was stored
                item_id = self._store(kernel, task, variant, judgement)
            self.on_event(f"{kernel.task_id}: {variant.optimization!r} judged before: {_verdict(judgement)}")
            return VariantResult(variant.optimization, judgement, item_id, resumed=True)
        if not self._affords(report, EVALUATIONS_PER_VARIANT):
            return None
        report.evaluations += 1
        evaluation = evaluate_candidate(self.backend, task, variant.files)
        original = None
        if evaluation.correct and evaluation.latency is not None:  # untimed (an interpreter): nothing to compare
            report.evaluations += 1  # the original profiled right after: the two share the machine's state
            original = profile_again(self.backend, task, kernel.files)
        judgement = judge_removal(evaluation, original)
        self.ledger.record_judgement(kernel, variant, judgement)
        item_id = self._store(kernel, task, variant, judgement) if judgement.kept else None
        self.on_event(f"{kernel.task_id}: {variant.optimization!r}: {_verdict(judgement)}"
                      + (f" -> item {item_id}" if item_id is not None else ""))
        return VariantResult(variant.optimization, judgement, item_id)

    def _store(self, kernel: KnownKernel, task: Task, variant: Variant, judgement: Judgement) -> int:
        assert judgement.gain is not None  # a kept judgement always has its gain
        item_id = self.memory.add_items([lesson_item(kernel, task, variant, judgement.gain)])[0]
        self.ledger.record_judgement(kernel, variant, judgement, item_id)
        return item_id


def _distinct(variants: list[Variant], kernel: KnownKernel, unread: list[str]) -> list[Variant]:
    """Variants that change the kernel, each source once (the first name given to it); the others are said in
    `unread`."""
    seen = {kernel.sha256: "the original"}
    kept = []
    for variant in variants:
        if variant.sha256 in seen:
            unread.append(f"variant {variant.optimization!r}: the same source as {seen[variant.sha256]}")
        else:
            seen[variant.sha256] = repr(variant.optimization)
            kept.append(variant)
    return kept


def _verdict(judgement: Judgement) -> str:
    if judgement.kept:
        return f"kept, {judgement.gain} slower without it"
    return f"discarded: {judgement.reason}"
