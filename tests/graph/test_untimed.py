"""A correct kernel that was not timed (the triton interpreter) carries no time from the evaluation to the
memory's credit: no latency, no speedup, the episode ends at it, and the memory gives correctness credit only."""

from __future__ import annotations

from typing import Any

import pytest

from kernelsage.graph import routing
from kernelsage.graph.nodes.curator import episode_trace
from kernelsage.graph.nodes.optimizer import profile_summary
from kernelsage.graph.records import Attempt, EpisodeOutcome, as_state
from kernelsage.memory_backend.params import SageParams
from kernelsage.memory_backend.policies import get_policy
from kernelsage.memory_backend.records import Exposure, ItemStats
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import (
    Artifact,
    Candidate,
    CompileResult,
    Evaluation,
    ProfileResult,
    Status,
    Timing,
    VerifyResult,
)

UNTIMED = ProfileResult(status=Status.OK, ok=True, case="perf", timed=False, speedup=None, output_correct=True,
                        message="not timed")


class _Backend:
    """A backend whose profile, like the triton interpreter's, checks the output and times nothing."""

    name = "stub"
    candidate_files = ("kernel.py",)

    def __init__(self, profile: ProfileResult) -> None:
        self._profile = profile

    def compile(self, candidate: Candidate, **_: Any) -> CompileResult:
        return CompileResult(ok=True, status=Status.OK, artifact=Artifact(backend="stub", path="-", key="k"))

    def verify(self, artifact: Artifact, task: Any, **_: Any) -> VerifyResult:
        return VerifyResult(status=Status.OK, correct=True, trials=1)

    def profile(self, artifact: Artifact, task: Any, **_: Any) -> ProfileResult:
        return self._profile


@pytest.fixture(scope="module")
def task() -> Any:
    return find_task(load_suite("builtin", task_ids=["l1_relu"]), "l1_relu")


def _untimed_attempt(round_no: int = 1, adopted: tuple[int, ...] = ()) -> Attempt:
    evaluation = Evaluation(status=Status.OK, correct=True, compile=CompileResult(ok=True, status=Status.OK),
                            verify=VerifyResult(status=Status.OK, correct=True), profile=UNTIMED)
    return Attempt(round=round_no, stage="draft", status="ok", evaluation=evaluation, adopted=list(adopted))


def test_an_untimed_evaluation_is_correct_with_no_latency(task) -> None:
    evaluation = evaluate_candidate(_Backend(UNTIMED), task, {"kernel.py": "pass"})  # type: ignore[arg-type]
    assert evaluation.correct and evaluation.untimed
    assert evaluation.latency is None and evaluation.reference_latency is None
    assert evaluation.profile is not None and evaluation.profile.speedup is None


def test_a_timed_profile_without_timings_is_still_not_correct(task) -> None:
    broken = ProfileResult(status=Status.OK, ok=True, output_correct=True)  # timed, yet no timings came back
    assert not evaluate_candidate(_Backend(broken), task, {"kernel.py": "pass"}).correct  # type: ignore[arg-type]
    timing = Timing(mean=2.0, median=2.0, cv=0.0, minimum=2.0, warmup=1, reps=3)
    timed = ProfileResult(status=Status.OK, ok=True, output_correct=True, candidate=timing, reference=timing,
                          speedup=1.0)
    evaluation = evaluate_candidate(_Backend(timed), task, {"kernel.py": "pass"})  # type: ignore[arg-type]
    assert evaluation.correct and not evaluation.untimed and evaluation.latency == 2.0


def test_an_untimed_correct_kernel_solves_the_episode_with_no_times() -> None:
    outcome = EpisodeOutcome.of(task_id="l1_relu", episode_id="e", level=1, rounds=1, attempts=[_untimed_attempt()])
    assert outcome.solved and outcome.correct_candidates == 1 and outcome.first_correct_round == 1
    assert (outcome.t_first, outcome.t_best, outcome.t_reference) == (None, None, None)
    assert (outcome.speedup, outcome.measured_speedup, outcome.self_speedup) == (None, None, None)


def test_an_untimed_correct_kernel_ends_the_episode_instead_of_being_refined() -> None:
    attempt = as_state(_untimed_attempt())
    state = {"task_id": "t", "round": 1, "budget": 5, "attempts": [attempt], "best": attempt,
             "early_stop_speedup": 1.5}
    assert routing.route_after_evaluate(state) == "finish"
    assert not routing.reached_early_stop(state)  # neither fast enough to stop nor slow: it has no time


def test_the_optimizer_is_told_the_kernel_was_not_timed() -> None:
    summary = profile_summary(UNTIMED)
    assert "not timed" in summary and "ms" not in summary


def test_the_memory_gives_an_untimed_kernel_correctness_credit_and_no_speed_credit() -> None:
    exposures = [Exposure(item_id=1, round=1, tier="cold", adopted=True, rationale="used it"),
                 Exposure(item_id=2, round=1, tier="cold", adopted=False, rationale="not relevant")]
    attempt = as_state(_untimed_attempt(adopted=(1,)))
    state = {"episode_id": "e", "task_id": "l1_relu", "level": 1, "attempts": [attempt], "first_correct": attempt,
             "best": attempt, "adoption": [e.model_dump() for e in exposures]}
    trace = episode_trace(state, "sage", "scripted")  # type: ignore[arg-type]
    assert trace.solved and trace.t_best == trace.t_first and trace.metadata["timed"] is False
    assert [r.latency for r in trace.rounds] == [None]
    stats = {1: ItemStats(item_id=1, utility=0.0, n_ret=0), 2: ItemStats(item_id=2, utility=0.0, n_ret=0)}
    update = get_policy("sage").apply_episode(trace, stats, SageParams())
    assert update.terminal_score == 0.0  # solved: no failure penalty (-delta); no speed: z = 0
    assert update.credits == pytest.approx({1: 0.0, 2: -0.2})
    failed = get_policy("sage").apply_episode(episode_trace({**state, "first_correct": None, "best": None},
                                                            "sage", "scripted"), stats, SageParams())  # type: ignore[arg-type]
    assert failed.terminal_score < 0.0  # unlike an episode that solved nothing
    values = get_policy("value").apply_episode(trace, stats, SageParams())
    assert values.credits[1] > 0.0  # the draft's correctness is rewarded as on a timed device
