"""Noise never counts as a speedup: the rule on made-up timings, and on real kernels measured here."""

from __future__ import annotations

import pytest

from kernelsage.graph.nodes.evaluate import rechecked
from kernelsage.graph.records import Attempt, EpisodeOutcome, Recheck, best_of
from kernelsage.tasks.loaders import find_task
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import CompileResult, Evaluation, ProfileResult, Status, Timing
from kernelsage.tools.timing import clearly_faster, clearly_faster_relative, timing_from_samples
from tests.graph.scripts import FAST, MEDIAN_CALLS, SLOW, example_source


def _timing(median: float, spread: float) -> Timing:
    return timing_from_samples([median * (1 + spread * (i / 50 - 1)) for i in range(101)], warmup=5)


def test_overlapping_intervals_are_equal_and_separated_ones_are_not() -> None:
    base, close, far = _timing(1.0, 0.2), _timing(0.95, 0.2), _timing(0.5, 0.2)
    assert not clearly_faster(close, base) and not clearly_faster(base, close)
    assert clearly_faster(far, base) and not clearly_faster(base, far)
    assert not clearly_faster(Timing(mean=0.1, median=0.1, cv=0, minimum=0.1, warmup=0, reps=1), base)


def test_across_runs_the_reference_measured_beside_each_kernel_cancels_drift() -> None:
    # The second run was on a machine twice as slow: its kernel only looks slower.
    first, first_ref = _timing(1.0, 0.05), _timing(2.0, 0.05)
    later, later_ref = _timing(1.9, 0.05), _timing(4.0, 0.05)
    assert not clearly_faster_relative(first, first_ref, later, later_ref)
    assert not clearly_faster_relative(later, later_ref, first, first_ref)
    # A real gain beyond the 5% floor counts in the same drifting conditions.
    better = _timing(1.2, 0.05)
    assert clearly_faster_relative(better, later_ref, first, first_ref)


def _at(median: float, reference: float, round_: int, recheck: tuple[float, float] | None = None) -> Attempt:
    """A correct attempt with made-up timings (candidate and reference medians, spread 2%)."""
    profile = ProfileResult(status=Status.OK, ok=True, output_correct=True, candidate=_timing(median, 0.02),
                            reference=_timing(reference, 0.02))
    checked = Recheck(round=1, candidate=_timing(recheck[0], 0.02), reference=_timing(recheck[1], 0.02)) \
        if recheck else None
    return Attempt(round=round_, stage="refine", status="ok", rechecked=checked,
                   evaluation=Evaluation(status=Status.OK, compile=CompileResult(ok=True, status=Status.OK),
                                         profile=profile, correct=True, latency=median,
                                         reference_latency=reference))


def test_a_claim_that_the_best_measured_again_beside_it_undoes_is_no_improvement() -> None:
    best = _at(1.0, 1.0, 1)  # measured in a slow state of the machine: 1.0 of its reference
    # round 2 ran in a faster state (0.6 of its reference); the best, profiled again right after, is 0.6 too
    drifted = _at(0.6, 1.0, 2, recheck=(0.6, 1.0))
    assert drifted.clearly_faster_than(best) and not drifted.improves_on(best)
    better = _at(0.3, 1.0, 2, recheck=(0.6, 1.0))  # and one that beats the best measured again as well
    assert better.improves_on(best)
    assert best_of([best, drifted]) is best and best_of([best, better]) is better
    unchecked = _at(0.6, 1.0, 2)  # no fresh measurement (its profile failed): the claim stands
    assert unchecked.improves_on(best)


def test_a_claim_beyond_the_machines_drift_needs_no_second_profile() -> None:
    first = _at(8.0, 1.0, 1)  # a first draft at 8x its reference
    much_better = _at(1.0, 1.0, 2)  # 8x faster: drift between runs (0.88x-1.92x of the reference) cannot make that
    assert much_better.faster_beyond_drift(first) and not first.faster_beyond_drift(much_better)
    # nothing is profiled again: the stand-in for a backend has no compile, so a try would raise
    assert rechecked(object(), None, much_better, first) is much_better and much_better.improves_on(first)
    modest = _at(4.0, 1.0, 2)  # 2x: a change of the machine could make that, so the best is measured again
    assert modest.clearly_faster_than(first) and not modest.faster_beyond_drift(first)
    with pytest.raises(AttributeError):
        rechecked(object(), None, modest, first)


@pytest.mark.slow
def test_the_same_kernel_measured_again_never_earns_credit(cpu_backend, suite) -> None:
    task = find_task(suite, "l1_relu")
    files = {"kernel.cpp": example_source("l1_relu")}
    attempts: list[Attempt] = []
    best = None
    for n in range(3):  # as the evaluate node does: a claim to beat the best is held against it measured again
        attempt = Attempt(round=n + 1, stage="refine", status="ok", files=files,
                          evaluation=evaluate_candidate(cpu_backend, task, files))
        attempt = rechecked(cpu_backend, task, attempt, best)
        attempts.append(attempt)
        if best is None or attempt.improves_on(best):
            best = attempt
    assert all(a.correct for a in attempts)
    outcome = EpisodeOutcome.of(task_id=task.id, episode_id="noise", level=1, rounds=3, attempts=attempts)
    assert best is attempts[0] and best_of(attempts) is attempts[0] and outcome.self_speedup == 1.0


@pytest.mark.slow
def test_a_kernel_that_does_a_sixteenth_of_the_work_is_credited(cpu_backend, suite, monkeypatch) -> None:
    monkeypatch.setattr(cpu_backend, "reps", MEDIAN_CALLS)
    task = find_task(suite, "l1_relu")
    slow, fast = (Attempt(round=n, stage="refine", status="ok",
                          evaluation=evaluate_candidate(cpu_backend, task, {"kernel.cpp": source}))
                  for n, source in ((1, SLOW), (2, FAST)))
    timings = [(a.evaluation.profile.candidate, a.evaluation.profile.reference) for a in (slow, fast)]
    assert fast.clearly_faster_than(slow) and not slow.clearly_faster_than(fast), timings
    outcome = EpisodeOutcome.of(task_id=task.id, episode_id="gain", level=1, rounds=2, attempts=[slow, fast])
    assert outcome.self_speedup > 1.05 and outcome.t_best == fast.latency


def test_a_repeat_of_files_whose_claim_the_recheck_undid_gets_no_second_draw() -> None:
    from kernelsage.graph.nodes.evaluate import make_evaluate_node
    from kernelsage.graph.records import PendingCandidate, as_state
    from kernelsage.graph.resources import AgentModels, AgentResources
    from kernelsage.tools.results import content_hash

    files = {"kernel.cpp": "// the round-2 kernel"}
    best = _at(1.0, 1.0, 1)
    drifted = _at(0.6, 1.0, 2, recheck=(0.6, 1.0)).model_copy(update={"files": files,
                                                                      "candidate_hash": content_hash(files)})
    assert drifted.clearly_faster_than(best) and not drifted.improves_on(best)  # the recheck undid its claim
    # the stand-in backend has no compile: judging the repeat, or measuring the best again beside it, would raise
    node = make_evaluate_node(AgentResources(models=AgentModels(generator=None), backend=object(),
                                             tasks=lambda task_id: None))
    state = {"task_id": "l1_relu", "round": 3, "stage": "refine", "attempts": [as_state(best), as_state(drifted)],
             "best": as_state(best), "first_correct": as_state(best),
             "pending": as_state(PendingCandidate(files=files))}
    update = node(state, None)
    (repeat,) = update["attempts"]
    assert repeat["evaluation"] == as_state(drifted)["evaluation"] and "best" not in update
    assert repeat["detail"].startswith("the same files as round 2")
