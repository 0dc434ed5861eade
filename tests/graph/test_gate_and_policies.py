"""The adoption gate, strict parsing with re-asks, and every memory policy wired through the graph."""

from __future__ import annotations

import pytest

from kernelsage.memory_backend.store import MemoryStore
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import SLOW, adoption_only, candidate


def test_an_answer_that_leaves_out_shown_items_is_asked_again(episode, seeded) -> None:
    state, model = episode([candidate(SLOW, drop=1), adoption_only()], budget=1, top_k=2)
    assert "No adoption state for items" in model.requests[1][-1].content
    assert [a["status"] for a in state["attempts"]] == ["ok"]
    assert len(state["adoption"]) == 2  # both shown items resolved, one of them on the re-ask


def test_adopting_an_id_that_was_never_shown_is_asked_again(episode, seeded) -> None:
    state, model = episode([candidate(SLOW, extra_ids=(999_999,)), adoption_only()], budget=1, top_k=2)
    assert "Items [999999] were never shown" in model.requests[1][-1].content
    assert 999_999 not in {a["item_id"] for a in state["adoption"]}
    assert state["attempts"][0]["status"] == "ok"


def test_an_unresolved_round_is_not_compiled_and_spends_budget(episode, seeded) -> None:
    state, model = episode([candidate(SLOW, drop=2), "no json here", "still nothing"], budget=1, top_k=2,
                           max_gate_asks=2)
    assert [a["status"] for a in state["attempts"]] == ["adoption_unresolved"]
    assert state["attempts"][0]["evaluation"] is None and state["adoption"] == []
    assert state["memory_update"]["terminal_score"] == -0.2  # a failed episode, nothing to credit
    assert len(model.requests) == 3  # the answer and two re-asks, then the round failed


def test_a_malformed_answer_is_asked_again_with_the_parse_error(episode, seeded) -> None:
    state, model = episode(["Here is my kernel: int main() {}", candidate(SLOW)], budget=1, top_k=2)
    feedback = model.requests[1][-1].content
    assert "kernel.cpp" in feedback  # the re-ask names what was missing
    assert state["attempts"][0]["status"] == "ok"


def test_an_answer_that_stays_malformed_fails_the_round(episode, seeded) -> None:
    state, _ = episode(["nothing", "still nothing", "nothing again"], budget=1, max_parse_retries=2)
    assert [a["status"] for a in state["attempts"]] == ["parse_error"]


@pytest.mark.parametrize(("policy", "learns", "shows"), [
    ("sage", True, True), ("atu-only", True, True), ("uniform", True, True), ("random-ugc", True, True),
    ("value", True, True), ("static", False, True), ("none", False, False),
])
def test_every_memory_policy_wires_through(episode, seeded, store: MemoryStore, namespace: str,
                                           policy: str, learns: bool, shows: bool) -> None:
    state, _ = episode([candidate(SLOW)], policy=policy, budget=1, top_k=2)
    report = state["memory_update"]
    assert report["policy"] == policy
    assert (len(state["adoption"]) == 2) is shows
    memory = store.open(namespace, embeddings=fake_embeddings(), policy=policy if policy != "none" else "sage")
    items = [memory.get_item(i) for i in seeded]
    if policy == "none":
        assert report["updated"] is False and memory.stats()["episodes"] == 0
        return
    assert report["updated"] is True and memory.stats()["episodes"] == 1
    assert any(i.n_ret == 1 for i in items) is learns
    if policy == "uniform":  # every shown item gets the episode reward (z = 0: one correct kernel)
        assert set(report["credits"].values()) == {0.0}
    if policy == "sage":
        assert sorted(report["credits"].values()) == [-0.2, 0.0]
    if policy == "value":
        assert any(i.q_draft == pytest.approx(0.1) for i in items)  # Q1 <- 0 + 0.1 (1 - 0)
    if policy == "static":
        assert report["credits"] == {} and all(i.utility == 0.0 for i in items)


def test_the_gate_reask_shows_the_code_and_only_the_items_it_asks_about(episode, seeded) -> None:
    state, model = episode([candidate(SLOW, drop=1), adoption_only()], budget=1, top_k=2)
    reask = model.requests[1][-1].content
    shown = [a["item_id"] for a in state["adoption"]]
    assert "```cpp file=kernel.cpp" in reask and "deliberately redundant work" in reask  # the candidate
    assert "l1_relu" in reask
    assert f"- id {shown[1]} (" in reask and f"- id {shown[0]} (" not in reask  # only the missing item


def test_a_huge_malformed_answer_is_not_repeated_whole(episode, seeded) -> None:
    from kernelsage.graph.nodes.bounds import MAX_ECHO_CHARS

    state, model = episode(["x" * 100_000, candidate(SLOW)], budget=1, top_k=2)
    echoed = model.requests[1][-2].content
    assert len(echoed) <= MAX_ECHO_CHARS and "characters left out" in echoed
    assert len(model.requests[1]) == 4  # system, prompt, the bounded answer, the feedback
    assert state["attempts"][0]["status"] == "ok"
