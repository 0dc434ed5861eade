"""The routing functions on hand-made states."""

from __future__ import annotations

from typing import Any

from kernelsage.graph import routing
from kernelsage.graph.records import Attempt, as_state
from kernelsage.tools.results import CompileResult, Evaluation, Status


def _attempt(correct: bool, latency: float | None = None, reference: float | None = None) -> dict[str, Any]:
    status = Status.OK if correct else Status.WRONG_RESULT
    evaluation = Evaluation(status=status, correct=correct, latency=latency, reference_latency=reference,
                            compile=CompileResult(ok=True, status=Status.OK))
    return as_state(Attempt(round=1, stage="draft", status=status.value, evaluation=evaluation))


def test_retrieval_leads_to_drafting_until_a_kernel_is_correct() -> None:
    assert routing.route_after_retrieve({"task_id": "t", "stage": "draft"}) == "generator"
    assert routing.route_after_retrieve({"task_id": "t"}) == "generator"
    assert routing.route_after_retrieve({"task_id": "t", "stage": "refine"}) == "optimizer"


def test_the_gate_evaluates_only_a_resolved_candidate() -> None:
    pending = {"files": {}, "adoption": {}, "asks": 0}
    assert routing.route_after_gate({"task_id": "t", "pending": pending, "round": 3, "budget": 3}) == "evaluate"
    assert routing.route_after_gate({"task_id": "t", "pending": None, "round": 1, "budget": 3}) == "retrieve"
    assert routing.route_after_gate({"task_id": "t", "pending": None, "round": 3, "budget": 3}) == "finish"


def test_after_evaluation_failures_are_diagnosed_and_successes_refined() -> None:
    failed = {"task_id": "t", "round": 1, "budget": 5, "attempts": [_attempt(False)]}
    assert routing.route_after_evaluate(failed) == "diagnostician"
    solved = {"task_id": "t", "round": 2, "budget": 5, "attempts": [_attempt(True, 2.0, 1.0)],
              "best": _attempt(True, 2.0, 1.0)}
    assert routing.route_after_evaluate(solved) == "retrieve"
    assert routing.route_after_evaluate({**solved, "round": 5}) == "finish"
    assert routing.route_after_evaluate({**failed, "round": 5}) == "finish"


def test_early_stop_ends_refinement_once_the_reference_is_beaten_enough() -> None:
    state = {"task_id": "t", "round": 2, "budget": 30, "attempts": [_attempt(True, 0.5, 1.0)],
             "best": _attempt(True, 0.5, 1.0), "early_stop_speedup": 1.5}
    assert routing.route_after_evaluate(state) == "finish"
    assert routing.route_after_evaluate({**state, "early_stop_speedup": 3.0}) == "retrieve"
    assert routing.route_after_evaluate({**state, "early_stop_speedup": None}) == "retrieve"
