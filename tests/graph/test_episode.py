"""End to end on the CPU backend with a scripted model: fail -> diagnose -> fix -> refine -> curate."""

from __future__ import annotations

import pytest

from kernelsage.memory_backend.store import MemoryStore
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import BROKEN, FAST, MEDIAN_CALLS, SLOW, candidate, example_source, tool_call


def test_a_full_episode_credits_each_shown_item_by_the_formulas(episode, seeded, store: MemoryStore,
                                                                  namespace: str, cpu_backend,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_backend, "reps", MEDIAN_CALLS)  # the lessons below need "made it faster"
    state, model = episode([
        candidate(BROKEN),                                      # round 1: does not compile
        tool_call("summarize_compiler_errors"),                 # the diagnostician looks closer
        "The return statement lacks a semicolon; add it and compute y = max(x, 0).",
        candidate(SLOW),                                        # round 2: correct, slow
        candidate(FAST, adopt=lambda ids: set(ids[:2])),                    # round 3: faster
        "- Finish every C++ statement with a semicolon before compiling.\n- Drop redundant passes over memory.",
    ], budget=3, top_k=2)

    attempts = state["attempts"]
    assert [a["status"] for a in attempts] == ["compile_error", "ok", "ok"]
    assert attempts[0]["evaluation"]["compile"]["errors"][0]["line"] > 0
    assert state["first_correct"]["round"] == 2 and state["stage"] == "refine"
    assert "semicolon" in (model.requests[3][-1].content)  # the diagnosis reached the next draft
    assert model.bound_tool_names == ["compile_kernel", "verify_kernel", "profile_kernel", "show_mismatches",
                                      "summarize_compiler_errors"]
    assert model.remaining == 0

    # Every shown item of every round has an adoption record; credits follow ATU.
    shown_per_round = {r: [a["item_id"] for a in state["adoption"] if a["round"] == r] for r in (1, 2, 3)}
    assert all(len(ids) == 2 for ids in shown_per_round.values())
    adopted = {a["item_id"] for a in state["adoption"] if a["adopted"]}
    shown = {a["item_id"] for a in state["adoption"]}
    t_first, t_best = state["first_correct"]["latency"], state["best"]["latency"]
    z = 1 - t_best / t_first
    memory_report = state["memory_update"]
    assert memory_report["terminal_score"] == pytest.approx(z)
    expected = {str(i): (z / len(adopted) if i in adopted else -0.2) for i in shown}
    assert memory_report["credits"] == pytest.approx(expected)

    memory = store.open(namespace, embeddings=fake_embeddings())
    assert memory.stats()["episodes"] == 1
    assert memory.stats()["last_episode_params"]["top_k"] == 2  # the run's own setting, not the default 6
    for item_id in shown:  # first update: eta = 1, so u is the credit itself
        assert memory.get_item(item_id).utility == pytest.approx(expected[str(item_id)])
    lessons = [memory.get_item(i) for i in memory_report["new_items"]]
    assert [item.text for item in lessons] == ["Finish every C++ statement with a semicolon before compiling.",
                                               "Drop redundant passes over memory."]
    assert "compile error" in lessons[0].evidence and lessons[0].code_example.startswith("---")
    assert state["result"]["solved"] and state["result"]["rounds"] == 3


def test_a_run_top_k_above_the_pool_size_is_recorded_as_the_pool_retrieval_reads(store: MemoryStore, cpu_backend,
                                                                                 namespace: str) -> None:
    from kernelsage.graph.context import Context
    from kernelsage.graph.resources import AgentModels, AgentResources

    resources = AgentResources(models=AgentModels(generator=None), backend=cpu_backend, tasks=lambda _: None,
                               memory_store=store, embeddings=fake_embeddings())
    params = resources.memory(Context(namespace=namespace, top_k=64, seed_knowledge=False)).params
    assert (params.top_k, params.pool_size) == (64, 64)  # retrieval reads max(pool_size, k) items
    assert resources.memory(Context(namespace=namespace, seed_knowledge=False)).params.top_k == store.params.top_k


def test_the_same_lesson_taught_twice_in_one_episode_is_stored_once(episode, store: MemoryStore, namespace: str,
                                                                      cpu_backend,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_backend, "reps", MEDIAN_CALLS)  # the lesson below needs "made it faster"
    state, _ = episode([
        candidate(BROKEN),                                      # round 1: does not compile
        "Add the missing semicolon.",                           # the diagnosis
        candidate(SLOW),                                        # round 2: correct, slow
        candidate(FAST),                                        # round 3: faster
        "- Parallelise the outermost loop.\n- parallelise the  outermost loop.",  # one lesson for both transitions
    ], budget=3, seed_knowledge=False)

    memory = store.open(namespace, embeddings=fake_embeddings())
    lessons = [memory.get_item(i) for i in state["memory_update"]["new_items"]]
    assert [item.text for item in lessons] == ["Parallelise the outermost loop."]
    assert "fixed a compile error" in lessons[0].evidence and "made it faster" in lessons[0].evidence
    assert lessons[0].metadata["family"] == "activation"  # the task's category: where near-duplicates merge


def test_files_submitted_again_keep_their_verdict_and_are_not_judged_again(episode) -> None:
    source = example_source("l1_relu")
    state, _ = episode([candidate(source), candidate(source)], budget=2, seed_knowledge=False)
    first, again = state["attempts"]
    assert again["candidate_hash"] == first["candidate_hash"] and again["round"] == 2
    assert again["evaluation"] == first["evaluation"]  # the very profile of round 1: two would differ in timings
    assert again["detail"].startswith("the same files as round 1")
    assert state["best"]["round"] == 1 and state["result"]["self_speedup"] == 1.0

