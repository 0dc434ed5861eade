"""Where the episode goes next: plain functions of the state, tested on their own."""

from __future__ import annotations

from typing import Literal

from kernelsage.graph.records import Attempt
from kernelsage.graph.state import EpisodeState, attempts, best_attempt
from kernelsage.tuning.dialects import dialect_for
from kernelsage.tuning.space import TuningError

MAX_MODEL_ERROR_ROUNDS = 3  # consecutive rounds whose model call failed before the episode gives up


def episode_failure(state: EpisodeState) -> str | None:
    """Why the episode cannot go on, or None: the model failed in the last MAX_MODEL_ERROR_ROUNDS rounds
    (an endpoint that is down, or a request it rejects every time), so more rounds would only wait."""
    recent = attempts(state)[-MAX_MODEL_ERROR_ROUNDS:]
    if len(recent) < MAX_MODEL_ERROR_ROUNDS or any(a.status != "model_error" for a in recent):
        return None
    return f"model_error in {MAX_MODEL_ERROR_ROUNDS} rounds in a row; last: {recent[-1].detail}"


def budget_spent(state: EpisodeState) -> bool:
    return state.get("round", 0) >= state.get("budget", 30)


def reached_early_stop(state: EpisodeState) -> bool:
    """The best kernel beats the reference by the configured factor (when one is configured)."""
    best = best_attempt(state)
    target = state.get("early_stop_speedup")
    if target is None or best is None or not best.reference_latency or not best.latency:
        return False
    return best.reference_latency / best.latency >= target


def route_after_retrieve(state: EpisodeState) -> Literal["generator", "optimizer"]:
    """Drafting until the first correct kernel, refining after it."""
    return "optimizer" if state.get("stage") == "refine" else "generator"


def route_after_gate(state: EpisodeState) -> Literal["evaluate", "retrieve", "finish"]:
    """Evaluate a resolved candidate; a failed round (bad format, unresolved adoption, a failed model call)
    moves on, unless the budget is spent or the episode cannot go on."""
    if state.get("pending") is not None:
        return "evaluate"
    return "finish" if budget_spent(state) or episode_failure(state) else "retrieve"


def declares_tunables(backend: str, files: dict[str, str]) -> bool:
    """The files declare, in the backend's way, tunables with more than one configuration (docs/tuning.md)."""
    try:
        return dialect_for(backend)[0](files).size > 1
    except TuningError:  # none declared, a malformed declaration, or a backend without a dialect: not tuned
        return False


def should_tune(state: EpisodeState, attempt: Attempt, backend: str) -> bool:
    """The tuning step runs once per episode, on the first correct timed kernel whose files declare tunables
    (the first draft's, or a refinement's: a model that adds declarations proposes tuning), when it has a
    budget (`Context.tuning_budget`)."""
    return (state.get("tuning_budget", 0) > 0 and not state.get("tuning") and attempt.correct
            and not attempt.untimed and declares_tunables(backend, attempt.files))


def route_after_evaluate(state: EpisodeState, *, backend: str | None = None
                         ) -> Literal["finish", "diagnostician", "retrieve", "tune"]:
    """Spent budget or early stop ends the episode; a failure is diagnosed; success is refined, after the
    tuning step where `should_tune` (given the `backend`; without one there is no tuning). A correct kernel
    that was not timed (an interpreter) also ends it: it is neither slow nor fast, and no refinement could be
    told better or worse without a clock."""
    if budget_spent(state):
        return "finish"
    last = attempts(state)[-1]
    if last.correct:
        if reached_early_stop(state) or last.untimed:
            return "finish"
        return "tune" if backend is not None and should_tune(state, last, backend) else "retrieve"
    return "diagnostician"


def route_after_tune(state: EpisodeState) -> Literal["finish", "retrieve"]:
    """After tuning, refinement goes on unless the rounds tuning was charged spent the budget, or its kernel
    reached the early stop."""
    return "finish" if budget_spent(state) or reached_early_stop(state) else "retrieve"
