"""The tuning loop: every configuration built through the backend's compile (its sandbox and cache), verified
before it is timed, profiled beside the reference; exploration from the default through neighbouring
configurations, then successive halving of the finalists, all within a budget of compiles plus profiles.
The decisions are `search`'s; this module does the I/O and the bookkeeping."""

from __future__ import annotations

import math
from collections.abc import Callable

from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Candidate, Evaluation
from kernelsage.tuning.dialects import dialect_for
from kernelsage.tuning.params import FIRST_COST, TuningParams
from kernelsage.tuning.result import TriedConfig, TuningResult
from kernelsage.tuning.search import (
    Measurement,
    Round,
    beats_default,
    gain,
    halving_cost,
    next_candidates,
    ranked,
    round_agrees,
    rung_reps,
    survivors,
)
from kernelsage.tuning.space import Config, TuningError, TuningSpace, describe, probes


class _Run:
    """The state of one tuning run: what was tried, measured and spent."""

    def __init__(self, backend: KernelBackend, task: Task, files: dict[str, str], space: TuningSpace,
                 apply: Callable[[dict[str, str], Config], dict[str, str]], budget: int,
                 on_tried: Callable[[TriedConfig], None] | None) -> None:
        self.backend, self.task, self.files, self.space, self.apply = backend, task, files, space, apply
        self.budget, self.on_tried = budget, on_tried
        self.tried: dict[Config, TriedConfig] = {}
        self.compiles = self.profiles = 0
        self.timed = True

    @property
    def left(self) -> int:
        return self.budget - self.compiles - self.profiles

    def first(self, config: Config) -> Measurement | None:
        """Compile, verify and (when correct) profile a configuration not tried before."""
        evaluation = evaluate_candidate(self.backend, self.task, self.apply(self.files, config))
        self.compiles += 1
        profile = evaluation.profile
        self.profiles += profile is not None
        verdict = "correct" if evaluation.correct else evaluation.status.value
        message = "" if evaluation.correct else _why(evaluation)
        tried = TriedConfig(dict(config), verdict, config == self.space.default, message,
                            profile.candidate if profile else None, profile.reference if profile else None,
                            int(profile is not None))
        self.tried[config] = tried
        if self.on_tried:
            self.on_tried(tried)
        if evaluation.correct and profile is not None and not profile.timed:
            self.timed = False
        return self._measurement(config)

    def again(self, config: Config, reps: int | None) -> Measurement | None:
        """A correct configuration profiled once more (its build from the cache), with `reps` timed calls."""
        compiled = self.backend.compile(Candidate(task_id=self.task.id, files=self.apply(self.files, config)),
                                        task=self.task)
        profile = None
        if compiled.ok and compiled.artifact is not None:  # the cpu, triton and ascend backends all take `reps`
            profile = self.backend.profile(compiled.artifact, self.task, reps=reps)  # type: ignore[call-arg]
        self.profiles += 1
        tried = self.tried[config]
        tried.profiles += 1
        if profile is None or not (profile.ok and profile.output_correct and profile.candidate and profile.reference):
            tried.verdict = "failed_again"
            tried.message = "its profile failed, or its output was wrong, when profiled again"
            return None
        tried.candidate, tried.reference = profile.candidate, profile.reference
        return self._measurement(config)

    def _measurement(self, config: Config) -> Measurement | None:
        tried = self.tried[config]
        if tried.verdict != "correct" or tried.candidate is None or tried.reference is None:
            return None
        return Measurement(config, tried.candidate, tried.reference)


def _why(evaluation: Evaluation) -> str:
    for step in (evaluation.profile, evaluation.verify, evaluation.compile):
        text = getattr(step, "message", "") or getattr(step, "reason", "") or getattr(step, "log", "")
        if step is not None and text:
            return text.strip().splitlines()[0][:200]
    return evaluation.status.value


def tune(backend: KernelBackend, task: Task, files: dict[str, str], *, budget: int | None = None,
         params: TuningParams = TuningParams(),
         on_tried: Callable[[TriedConfig], None] | None = None) -> TuningResult:
    """Search the tunables `files` declares for the fastest correct configuration on `task`, spending at most
    `budget` (default `params.budget`) compiles plus profiles. Raises TuningError when nothing can be tuned (no
    or malformed declarations, a budget below one evaluation, a kernel not correct at its default configuration)."""
    budget = params.budget if budget is None else budget
    space_for, apply = dialect_for(backend.name)
    space = space_for(files)
    if space.size < 2:
        raise TuningError(f"only one configuration is declared ({describe(space.default)}): nothing to tune")
    if budget < FIRST_COST:
        raise TuningError(f"a budget of {budget} cannot evaluate even the default (one compile and one profile)")
    run = _Run(backend, task, files, space, apply, budget, on_tried)
    default = run.first(space.default)
    if default is None and run.timed:
        tried = run.tried[space.default]
        raise TuningError(f"the kernel is not correct at its default configuration ({describe(space.default)}): "
                          f"{tried.verdict}: {tried.message}")
    if not run.timed:  # an interpreter: each configuration is checked, none timed, the default stays
        for config in space.configs[1:]:
            if run.left < FIRST_COST:
                break
            run.first(config)
        return _result(run, space.default, "not timed on this device (correctness only): the default is kept")
    assert default is not None
    measured = _explore(run, default, params.parents, halving_cost(params.finalists, params.final_rounds))
    return _halve(run, default, measured, params)


def _explore(run: _Run, default: Measurement, parents: int, reserve: int) -> list[Measurement]:
    """The default's neighbours coarse before fine (`probes`), then the nearest neighbours of the fastest
    configurations so far, generation by generation, while the budget leaves `reserve` profiles for the halving."""
    measured = [default]
    frontier = probes(run.space, default.config)
    while frontier and run.left - FIRST_COST >= reserve:
        measurement = run.first(frontier.pop(0))
        if measurement is not None:
            measured.append(measurement)
        if not frontier:
            frontier = next_candidates(run.space, measured, set(run.tried), parents)
    return measured


def _halve(run: _Run, default: Measurement, measured: list[Measurement], params: TuningParams) -> TuningResult:
    """Successive halving of the finalists down to the best and the default, every rung profiled anew with
    `params.rung_growth` times the timed calls of the one before (within `params.rung_seconds` per profile);
    then the best and the default profiled one after the other, `params.final_rounds` times, in turn first."""
    rung = survivors(measured, params.finalists, default.config)
    last = {m.config: m for m in measured}
    base, number = getattr(run.backend, "reps", None), 0

    def reps() -> int | None:
        per_call = max(last[c].candidate.median + last[c].reference.median for c in rung)
        return rung_reps(base, params.rung_growth, number, per_call, params.rung_seconds) if base else None

    while len(rung) > 2 and run.left >= len(rung):
        calls = reps()
        last = {m.config: m for m in (run.again(config, calls) for config in rung) if m is not None}
        number += 1
        if default.config not in last:
            break
        rung = survivors(list(last.values()), math.ceil(len(rung) / 2), default.config)
    best = ranked(last.values())[0] if last else default
    rounds: list[Round] = []
    if best.config != default.config and default.config in last:
        calls = reps()
        while len(rounds) < params.final_rounds and run.left >= 2:
            order = (default.config, best.config) if len(rounds) % 2 == 0 else (best.config, default.config)
            first, second = (run.again(config, calls) for config in order)
            on_default, on_best = (first, second) if order[0] == default.config else (second, first)
            if on_default is None or on_best is None:
                break
            rounds.append((on_default, on_best))
            if not round_agrees(rounds[-1]):
                break  # every round must agree: this one settles it as a tie, and the budget left is kept
        rounds = rounds or [(last[default.config], best)]
    if not rounds:
        return _result(run, default.config, "the default is the fastest")
    counted = f"{len(rounds)} paired round{'s' if len(rounds) > 1 else ''}"
    if beats_default(rounds, params.final_rounds):
        return _result(run, best.config, f"clearly faster than the default ({counted})", gain(rounds), best.config)
    return _result(run, default.config, f"a tie: {describe(best.config)} was not clearly faster than the default "
                                        f"({counted}), which is kept", gain(rounds), best.config)


def _result(run: _Run, winner: Config, decision: str, gain: tuple[float, float, float] | None = None,
            best: Config | None = None) -> TuningResult:
    return TuningResult(
        task_id=run.task.id, backend=run.backend.name,
        parameters={p.name: list(p.values) for p in run.space.parameters}, space_size=run.space.size,
        budget=run.budget, default=dict(run.space.default), winner=dict(winner), decision=decision,
        best=dict(best or winner), tried=list(run.tried.values()), compiles=run.compiles, profiles=run.profiles,
        gain=gain)
