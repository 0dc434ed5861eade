"""Noise never counts as a speedup: the rule on made-up timings, and on real kernels measured here."""

from __future__ import annotations

import pytest

from kernelsage.graph.records import Attempt, EpisodeOutcome, best_of
from kernelsage.tasks.loaders import find_task
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Timing
from kernelsage.tools.timing import clearly_faster, clearly_faster_relative, timing_from_samples
from tests.graph.scripts import SLOW, example_source


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


@pytest.mark.slow
def test_the_same_kernel_measured_again_never_earns_credit(cpu_backend, suite) -> None:
    task = find_task(suite, "l1_relu")
    runs = [evaluate_candidate(cpu_backend, task, {"kernel.cpp": example_source("l1_relu")}) for _ in range(3)]
    attempts = [Attempt(round=n + 1, stage="refine", status=e.status.value, evaluation=e) for n, e in enumerate(runs)]
    assert all(a.correct for a in attempts)
    assert not any(a.clearly_faster_than(b) for a in attempts for b in attempts if a is not b)
    outcome = EpisodeOutcome.of(task_id=task.id, episode_id="noise", level=1, rounds=3, attempts=attempts)
    assert best_of(attempts) is attempts[0] and outcome.self_speedup == 1.0
    assert outcome.measured_speedup is not None and outcome.speedup is not None


@pytest.mark.slow
def test_a_kernel_that_does_a_sixteenth_of_the_work_is_credited(cpu_backend, suite) -> None:
    task = find_task(suite, "l1_relu")
    slow, fast = (Attempt(round=n, stage="refine", status="ok",
                          evaluation=evaluate_candidate(cpu_backend, task, {"kernel.cpp": source}))
                  for n, source in ((1, SLOW), (2, example_source("l1_relu"))))
    assert fast.clearly_faster_than(slow) and not slow.clearly_faster_than(fast)
    outcome = EpisodeOutcome.of(task_id=task.id, episode_id="gain", level=1, rounds=2, attempts=[slow, fast])
    assert outcome.self_speedup > 1.05 and outcome.t_best == fast.latency
