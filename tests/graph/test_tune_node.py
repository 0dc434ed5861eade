"""The tuning step inside the episode (docs/tuning.md, "In the graph"): where the graph decides to tune (pure
routing), the node on the real cpu backend, the episode end to end with a scripted model (the record carries the
tuning, a win becomes a `tuned` lesson), and what stays as it was when the tuning budget is 0 or the default wins."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from kernelsage.errors import ConfigurationError
from kernelsage.evals.records import EpisodeRecord, read_records
from kernelsage.evals.stream import StreamSettings, episode_record
from kernelsage.graph import AgentModels, Context, build_graph, routing
from kernelsage.graph.nodes.tune import make_tune_node
from kernelsage.graph.nodes.tuning_lesson import tuning_lesson, tuning_lessons
from kernelsage.graph.records import Attempt, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.runner import run_episode
from kernelsage.graph.runner_events import step_events
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import CompileResult, Evaluation, ProfileResult, Status
from kernelsage.tools.sandbox import Limits
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import candidate

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "suite"

# relu32 with one tunable whose default is far slower than its other value (volatile stores: the compiler keeps
# every pass), so that the paired rounds agree however loaded the machine is.
SLOW_DEFAULT = """#include "kernelsage_cpu.h"
#include <cstdint>

KS_TUNABLE(PASSES, 16, 1);

int ks_kernel(const ks_tensor* in, int n_in, ks_tensor* out, int n_out, const ks_attr* a, int n_a) {
    const int64_t n = ks_numel(&in[0]);
    const float* x = (const float*)in[0].data;
    volatile float* y = (float*)out[0].data;
    for (int pass = 0; pass < PASSES; ++pass)
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
"""
PLAIN = SLOW_DEFAULT.replace("KS_TUNABLE(PASSES, 16, 1);\n", "constexpr int PASSES = 1;\n")


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory):
    """One verify trial and 10 timed calls a profile, with a private build cache (as tests/tuning's)."""
    cpu = CpuBackend(cache_dir=tmp_path_factory.mktemp("tune-node-builds"), trials=1, reps=10, warmup=1,
                     run_limits=Limits(wall_s=30, cpu_s=60))
    yield cpu
    cpu.close()


@pytest.fixture(scope="module")
def relu32():
    return find_task(load_suite(SUITE), "relu32")


# --- where the graph decides (pure) ---------------------------------------------------------------------------

def _judged(source: str, *, correct: bool = True, timed: bool = True) -> dict[str, Any]:
    status = Status.OK if correct else Status.WRONG_RESULT
    profile = None if timed else ProfileResult(ok=True, status=Status.OK, timed=False)
    evaluation = Evaluation(status=status, correct=correct, latency=2e-3 if timed else None,
                            reference_latency=1e-3 if timed else None, profile=profile,
                            compile=CompileResult(ok=True, status=Status.OK))
    return as_state(Attempt(round=1, stage="draft", status=status.value, files={"kernel.cpp": source},
                            evaluation=evaluation))


def _state(source: str = SLOW_DEFAULT, **changes: Any) -> dict[str, Any]:
    attempt = _judged(source)
    return {"task_id": "relu32", "round": 1, "budget": 10, "tuning_budget": 16, "attempts": [attempt],
            "best": attempt, "first_correct": attempt, **changes}


def test_the_first_correct_timed_kernel_that_declares_tunables_is_tuned_once_when_the_budget_is_on() -> None:
    route = partial(routing.route_after_evaluate, backend="cpu")
    assert route(_state()) == "tune"
    assert route(_state(tuning_budget=0)) == "retrieve"  # off: the episode goes on as before
    assert route(_state(tuning=[{"winner": {"PASSES": 16}}])) == "retrieve"  # once per episode
    assert route(_state(PLAIN)) == "retrieve"  # nothing declared
    assert route(_state(SLOW_DEFAULT.replace("16, 1)", "16)"))) == "retrieve"  # one configuration only
    assert route(_state(SLOW_DEFAULT.replace("16, 1)", "16, one)"))) == "retrieve"  # malformed: judged as written
    assert routing.route_after_evaluate(_state()) == "retrieve"  # no backend given: no tuning
    assert route(_state(round=10)) == "finish"  # the budget comes first
    untimed = _judged(SLOW_DEFAULT, timed=False)
    assert route(_state(attempts=[untimed])) == "finish"  # an interpreter: nothing to time, nothing to tune
    wrong = _judged(SLOW_DEFAULT, correct=False)
    assert route(_state(attempts=[wrong], best=None, first_correct=None)) == "diagnostician"
    # A refinement that declares tunables (the optimizer proposing tuning) is tuned too, when none ran yet.
    refined = {**_judged(SLOW_DEFAULT), "round": 3, "stage": "refine"}
    assert route(_state(PLAIN, attempts=[_judged(PLAIN), refined])) == "tune"


def test_after_tuning_the_episode_refines_unless_the_charged_rounds_spent_its_budget() -> None:
    assert routing.route_after_tune(_state(round=7)) == "retrieve"
    assert routing.route_after_tune(_state(round=10)) == "finish"
    assert routing.route_after_tune(_state(round=7, early_stop_speedup=0.4)) == "finish"  # 1 ms / 2 ms >= 0.4


def test_the_tuning_budget_is_off_by_default_and_set_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("KERNELSAGE_TUNING_BUDGET", raising=False)
    assert Context().tuning_budget == 0
    monkeypatch.setenv("KERNELSAGE_TUNING_BUDGET", "24")
    assert Context().tuning_budget == 24
    for bad in (1, -2):
        with pytest.raises(ConfigurationError, match=f"tuning budget {bad}: give 0 .* or at least 2"):
            Context(tuning_budget=bad)


# --- the lesson (pure) ----------------------------------------------------------------------------------------

WIN = {"winner": {"BLOCK": 16, "UNROLL": 4}, "default": {"BLOCK": 64, "UNROLL": 4}, "gain": [1.31, 1.12, 1.45],
       "decision": "clearly faster than the default (4 paired rounds)", "space_size": 12, "evaluations": 20,
       "tried": [{}] * 6}


def test_a_win_teaches_its_configuration_gain_and_interval_with_provenance_tuned() -> None:
    lesson = tuning_lesson(WIN, operator="l3_matmul", category="matmul", backend="cpu")
    assert lesson is not None and lesson.kind == "experience" and lesson.operator == "l3_matmul"
    assert lesson.text == ("Tuning l3_matmul (matmul) on the cpu backend: BLOCK=16 instead of the default BLOCK=64 "
                           "made the kernel 1.31x faster.")
    assert "1.31x [1.12, 1.45]" in lesson.evidence and "6 of 12 configurations tried in 20 evaluations" in lesson.evidence
    assert lesson.metadata == {"provenance": "tuned", "transition": "tuned", "backend": "cpu", "family": "matmul",
                               "config": {"BLOCK": 16, "UNROLL": 4}, "default": {"BLOCK": 64, "UNROLL": 4},
                               "gain": {"ratio": 1.31, "low": 1.12, "high": 1.45}}


def test_a_tie_the_default_fastest_or_a_failed_tuning_teach_nothing() -> None:
    tie = {**WIN, "winner": WIN["default"], "decision": "a tie: ... which is kept"}  # a gain measured, not kept
    fastest = {**WIN, "winner": WIN["default"], "gain": None}
    failed = {"task_id": "l3_matmul", "backend": "cpu", "budget": 8, "error": "not correct at its default"}
    for record in (tie, fastest, failed):
        assert tuning_lesson(record, operator="l3_matmul", category="matmul", backend="cpu") is None
    state = {"task_id": "l3_matmul", "tuning": [tie, WIN, failed]}
    assert [item.metadata["config"] for item in tuning_lessons(state, category="matmul", backend="cpu")] == \
        [WIN["winner"]]
    assert tuning_lessons({"task_id": "l3_matmul"}, category="matmul", backend="cpu") == []


def test_the_run_log_says_what_the_tuning_kept_or_why_it_stopped() -> None:
    before = {"task_id": "l3_matmul", "attempts": []}
    tuned = {**before, "tuning": [WIN], "attempts": [{"round": 11, "status": "ok", "tuned": True}]}
    [tune, judged] = step_events(before, tuned)
    assert (tune.name, judged.name) == ("tune", "round")
    assert tune.message == ("l3_matmul: tuned in 20 evaluations: BLOCK=16 UNROLL=4 kept, clearly faster than the "
                            "default (4 paired rounds)")
    assert tune.fields["gain"] == [1.31, 1.12, 1.45] and tune.fields["error"] is None
    stopped = {**before, "tuning": [{"error": "the kernel is not correct at its default configuration\n..."}]}
    assert [e.message for e in step_events(before, stopped)] == \
        ["l3_matmul: tuning stopped: the kernel is not correct at its default configuration"]
    assert step_events(tuned, tuned) == []


# --- the node on the real cpu backend -------------------------------------------------------------------------

def _judged_for_real(backend: CpuBackend, task: Any, source: str) -> dict[str, Any]:
    files = {"kernel.cpp": source}
    attempt = Attempt(round=1, stage="draft", status="ok", files=files,
                      evaluation=evaluate_candidate(backend, task, files))
    assert attempt.correct, attempt.evaluation
    return as_state(attempt)


def _run_node(backend: CpuBackend, task: Any, state: dict[str, Any]) -> dict[str, Any]:
    resources = AgentResources(models=AgentModels(generator=None), backend=backend, tasks=lambda _: task)
    return make_tune_node(resources)(state, None)


def test_the_node_spends_no_more_than_the_rounds_left_and_a_kept_default_changes_no_kernel(backend, relu32) -> None:
    # 2 rounds left: 4 evaluations, below the tuning budget of 16 and too few to explore beside the halving's
    # reserve, so the tuner measures the default alone and keeps it (its builds are the episode test's too).
    first = _judged_for_real(backend, relu32, SLOW_DEFAULT)
    update = _run_node(backend, relu32, _state(attempts=[first], best=first, budget=3))
    [record] = update["tuning"]
    assert record["budget"] == 4 and record["evaluations"] == 2 and [t["values"] for t in record["tried"]] == \
        [{"PASSES": 16}]
    assert record["winner"] == record["default"] and record["gain"] is None
    assert update["round"] == 2  # the 2 evaluations: one round
    assert "attempts" not in update and "best" not in update  # the kernel stays as judged


def test_a_tuning_that_stops_is_recorded_with_why_and_charged_one_round(backend, relu32) -> None:
    # A default that writes nothing (0 passes): what a flaky kernel judged correct once might do on a second run.
    state = _state(SLOW_DEFAULT.replace("PASSES, 16, 1", "PASSES, 0, 1"))
    update = _run_node(backend, relu32, state)
    [record] = update["tuning"]
    assert record["budget"] == 16 and "not correct at its default configuration (PASSES=0)" in record["error"]
    assert update["round"] == 2 and "attempts" not in update
    assert tuning_lessons({**state, **update}, category="activation", backend="cpu") == []


# --- the episode end to end -----------------------------------------------------------------------------------

def answer_by_prompt(source: str):
    """The labelled test double's answer whatever the episode asks: `source` to write, a line to learn."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if any("write reusable lessons" in str(m.content) for m in messages):
            return AIMessage(content="- Keep the kernel's passes over memory to one.")
        return candidate(source)(messages)

    return answer


def _episode(store: MemoryStore, backend: CpuBackend, namespace: str, *, budget: int, tuning_budget: int
             ) -> tuple[dict[str, Any], ScriptedChatModel]:
    model = ScriptedChatModel([answer_by_prompt(SLOW_DEFAULT)] * (budget + 2))
    graph = build_graph(models=AgentModels(generator=model), backend=backend, tasks=partial(find_task, load_suite(SUITE)),
                        memory_store=store, embeddings=fake_embeddings()).compile()
    settings = Context(namespace=namespace, budget=budget, tuning_budget=tuning_budget, seed_knowledge=False)
    state = run_episode(graph, task_id="relu32", level=1, context=settings, backend="cpu",
                        model="scripted-test-double", episode_id=f"{namespace}-relu32")
    return state, model


def _record_line(state: dict[str, Any], task: Any, path: Path) -> EpisodeRecord:
    """The episode's JSONL record as the stream writes it, read back."""
    settings = StreamSettings(run_id="r", policy="sage", namespace="n", model="scripted-test-double", backend="cpu")
    path.write_text(episode_record(state, task=task, position=0, settings=settings, seconds=1.0,
                                   memory=None).model_dump_json() + "\n")
    [record] = read_records(path)
    return record


def test_an_episode_tunes_its_first_correct_kernel_records_it_and_learns_the_winning_tiling(
        store: MemoryStore, backend, relu32, namespace: str, tmp_path: Path) -> None:
    # Round 1 writes the tunable kernel (correct, slow at its default); tuning finds PASSES=1 (the default, its one
    # neighbour, 4 paired rounds: 12 evaluations, 6 rounds), judged as a round of its own; the rounds left refine;
    # the curator stores the tuning's lesson. About 5 s on a loaded 2-core machine: real builds and profiles.
    state, model = _episode(store, backend, namespace, budget=9, tuning_budget=16)
    [record] = state["tuning"]
    assert record["winner"] == {"PASSES": 1} and record["evaluations"] <= 16
    assert record["default"] == {"PASSES": 16} and record["budget"] == 16  # 8 rounds left: 16 evaluations
    [tuned] = [Attempt.model_validate(a) for a in state["attempts"] if a.get("tuned")]
    assert tuned.round == 1 + -(-record["evaluations"] // 2) and tuned.stage == "refine" and tuned.correct
    assert tuned.files["kernel.cpp"] == SLOW_DEFAULT  # the model's kernel, with the winner's header beside it
    assert tuned.files["ks_tuning.h"].endswith("#define KS_TUNE_PASSES KS_TUNED(1)\n")
    assert state["result"]["rounds"] == 9 and state["result"]["tuning"] == [record]
    if tuned.improves_on(Attempt.model_validate(state["first_correct"])):  # the noise rule of every round
        assert state["best"]["round"] == tuned.round  # no rewrite of the slow default beat it
        assert any("ks_tuning.h" in str(request[-1].content) for request in model.requests[1:]), \
            "the refinements are shown the tuned best, its configuration header included"
    else:
        assert state["best"]["round"] != tuned.round

    saved = _record_line(state, relu32, tmp_path / "episodes.jsonl")
    assert saved.tuning == [record] and any(a.tuned for a in saved.attempts)

    memory = store.open(namespace, embeddings=fake_embeddings())
    items = [memory.get_item(i) for i in state["memory_update"]["new_items"]]
    [lesson] = [item for item in items if item.metadata.get("provenance") == "tuned"]
    assert lesson.provenance == "tuned" and lesson.metadata["config"] == {"PASSES": 1}
    assert lesson.metadata["gain"]["ratio"] >= 1.05 and lesson.source_episode == state["episode_id"]
    assert "PASSES=1 instead of the default PASSES=16" in lesson.text


def test_a_tuning_budget_of_zero_changes_nothing(store: MemoryStore, backend, relu32, namespace: str,
                                                 tmp_path: Path) -> None:
    state, _ = _episode(store, backend, namespace, budget=2, tuning_budget=0)
    assert not state.get("tuning") and not any(a.get("tuned") for a in state["attempts"])
    assert [a["round"] for a in state["attempts"]] == [1, 2]  # the model's rounds only
    saved = _record_line(state, relu32, tmp_path / "episodes.jsonl")
    line = (tmp_path / "episodes.jsonl").read_text()
    assert saved.tuning == [] and '"tuning"' not in line and '"tuned"' not in line  # records as before
    memory = store.open(namespace, embeddings=fake_embeddings())
    assert all(memory.get_item(i).provenance != "tuned" for i in state["memory_update"]["new_items"])
