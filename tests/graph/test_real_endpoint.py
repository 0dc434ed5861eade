"""Episodes and streams with a real ChatOpenAI (the real factory) against a local server that misbehaves
on purpose: every fault ends as a recorded round status, the episode and the stream go on where they can,
a fault no round can absorb stops the stream with one error, and resume makes progress."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from kernelsage.errors import ModelError
from kernelsage.evals.stream import StreamSettings, run_stream
from kernelsage.graph import AgentModels, Context, build_graph
from kernelsage.graph.nodes.bounds import MAX_DIAGNOSIS_CHARS
from kernelsage.graph.runner import run_episode
from kernelsage.models.factory import make_chat_model
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import SLOW, WRONG, candidate, example_source
from tests.models.openai_server import answer, cut_off, error, garbage, hang, overflow, serve, tool_calls


@pytest.fixture(autouse=True)
def quick_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"TIMEOUT": 0.5, "ATTEMPTS": 2, "MAX_TOKENS": 2000}.items():
        monkeypatch.setenv(f"KERNELSAGE_MODEL_{name}", str(value))
    monkeypatch.setattr("kernelsage.models.retry.wait_exponential_jitter", lambda **kw: (lambda state: 0.0))


@pytest.fixture
def graph_for(store, cpu_backend, suite):
    def build(url: str, checkpointer=None):
        model = make_chat_model("openai:test-model", base_url=url, api_key="sk-test")
        builder = build_graph(models=AgentModels(generator=model), backend=cpu_backend,
                              tasks=partial(find_task, suite), memory_store=store, embeddings=fake_embeddings())
        return builder.compile(checkpointer=checkpointer)
    return build


def run(graph, namespace: str, task_id: str = "l1_relu", budget: int = 3, **context):
    return run_episode(graph, task_id=task_id, level=1, context=Context(namespace=namespace, budget=budget, top_k=2,
                                                                       **context),
                       backend="cpu", model="openai:test-model", episode_id=f"{namespace}-{task_id}")


def user_text(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "user")


def test_cut_off_overflow_5xx_and_garbage_become_round_statuses(graph_for, seeded, namespace: str) -> None:
    with serve([cut_off(), overflow(), answer(candidate(SLOW)),  # round 1: cut off, too long, then correct
                error(500), error(502),                          # round 2: the endpoint gives up
                garbage()]) as server:                           # round 3: a body that is no completion
        state = run(graph_for(server.url), namespace)
    statuses = [a["status"] for a in state["attempts"]]
    assert statuses == ["ok", "model_error", "model_error"]
    assert "gave up after 2 attempts" in state["attempts"][1]["detail"] and server.url in state["attempts"][1]["detail"]
    assert "not a chat completion" in state["attempts"][2]["detail"]
    assert state["result"]["solved"] and state["result"]["failure"] is None and state["memory_update"]["updated"]
    first, reask, shrunk = (server.requests[i]["messages"] for i in range(3))
    assert "cut off at the output limit" in reask[-1]["content"]
    assert not any(m["role"] == "assistant" for m in reask)  # the cut answer is not sent back
    assert sum(len(m["content"]) for m in shrunk) < sum(len(m["content"]) for m in first)  # shrunk once
    assert "int ks_kernel(" in shrunk[1]["content"]  # the contract survives shrinking, with its rules
    assert "every element must be written" in shrunk[1]["content"] and "Return 0 on success" in shrunk[1]["content"]
    assert "x: float16 [33, 70]" in shrunk[1]["content"]  # and a case of every dtype
    assert state["attempts"][0]["prompt_tokens"] == 100  # the server's count


def test_every_conversation_alternates_turns_as_strict_chat_templates_require(
        graph_for, seeded, namespace: str) -> None:
    with serve([cut_off(), answer(candidate(WRONG)),                    # round 1: cut off, asked again: wrong
                tool_calls({"name": "show_mismatches"}, {"name": "verify_kernel"}),  # the diagnostician
                answer("Negative inputs give 1 instead of 0."),
                answer("no code at all"), answer(candidate(SLOW)),       # round 2: a format re-ask, then correct
                answer("- Write 0 for negative inputs.")],               # the curator's lesson
               alternating_roles=True) as server:
        state = run(graph_for(server.url), namespace, budget=2)
    assert server.rejected == 0, [[m["role"] for m in r["messages"]] for r in server.requests]
    assert [a["status"] for a in state["attempts"]] == ["wrong_result", "ok"]
    reask = server.requests[1]["messages"]
    assert [m["role"] for m in reask] == ["system", "user"] and "cut off at the output limit" in reask[-1]["content"]
    assert "Negative inputs give 1" in user_text(server.requests[4])  # the diagnosis reached round 2
    assert [m["role"] for m in server.requests[5]["messages"]] == ["system", "user", "assistant", "user"]
    assert len(server.requests) == 7  # the lesson was asked for too, and nothing was rejected


def test_a_prompt_that_cannot_fit_the_configured_window_is_not_sent(
        graph_for, seeded, namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSAGE_MODEL_CONTEXT", "1500")
    monkeypatch.setenv("KERNELSAGE_MODEL_MAX_TOKENS", "500")
    with serve([answer(candidate(SLOW))]) as server:
        state = run(graph_for(server.url), namespace, budget=1)
    assert server.requests == []  # neither the prompt nor its shrunk form could fit: nothing went out
    [attempt] = state["attempts"]
    assert attempt["status"] == "model_error" and "\n" not in attempt["detail"]
    for words in ("KERNELSAGE_MODEL_CONTEXT=1500", "output limit of 500 tokens", "about 925 prompt tokens",
                  "not sent", "already shrunk"):
        assert words in attempt["detail"], words


def test_the_diagnostician_survives_strict_servers_bad_tool_arguments_and_long_answers(
        graph_for, seeded, namespace: str) -> None:
    wrong = example_source("l1_relu")  # relu is not add: a wrong result
    with serve([answer(candidate(wrong)),
                tool_calls({"name": "show_mismatches", "args": {"limit": "many"}}),
                answer("The kernel computes relu instead of a + b. " * 400),  # far past 8 sentences
                hang(5)], reject_null_content=True) as server:
        state = run(graph_for(server.url), namespace, task_id="l1_add", budget=2)
    assert server.rejected == 0  # tool-call turns went out with content "", not null
    tool_output = next(m for m in server.requests[2]["messages"] if m["role"] == "tool")["content"]
    assert "do not fit show_mismatches's schema" in tool_output and "limit" in tool_output
    assert [a["status"] for a in state["attempts"]] == ["wrong_result", "model_error"]
    assert "Timeout" in state["attempts"][1]["detail"]
    next_prompt = user_text(server.requests[3])
    assert "relu instead of a + b" in next_prompt and "characters left out" in next_prompt
    assert len(state["diagnosis"]) <= MAX_DIAGNOSIS_CHARS


def test_an_advisory_step_failing_leaves_no_output_and_the_episode_goes_on(graph_for, seeded, namespace: str) -> None:
    with serve([answer(candidate(example_source("l1_relu"))), error(500), error(500),  # diagnostician gives up
                answer(candidate(SLOW))]) as server:
        state = run(graph_for(server.url), namespace, task_id="l1_add", budget=2)
    assert [a["status"] for a in state["attempts"]] == ["wrong_result", "wrong_result"]
    assert "Diagnosis" not in user_text(server.requests[3])
    assert state["memory_update"]["updated"]


def test_a_stream_records_failed_episodes_and_stops_when_the_model_keeps_failing(
        graph_for, suite, seeded, namespace: str, tmp_path: Path) -> None:
    tasks = [find_task(suite, t) for t in ("l1_relu", "l1_add", "l1_sigmoid", "l1_gelu")]
    settings = StreamSettings(run_id="down", policy="sage", namespace=namespace, model="openai:test-model",
                              backend="cpu", budget=5)
    records_path = tmp_path / "sage.jsonl"
    with serve([error(503)]) as server:
        graph = graph_for(server.url)
        with pytest.raises(ModelError, match=r"failed 3 episodes in a row.*same --run-id"):
            run_stream(graph, tasks, settings=settings, context=Context(namespace=namespace, budget=5),
                       records_path=records_path)
    lines = records_path.read_text().splitlines()
    assert len(lines) == 3  # each failed episode was recorded, with its reason, after 3 rounds (not 5)
    from kernelsage.evals.records import read_records
    records = read_records(records_path)
    assert all(r.rounds == 3 and r.failure and "model_error" in r.failure for r in records)
    assert all([a.status for a in r.attempts] == ["model_error"] * 3 for r in records)
    with serve([answer(candidate(SLOW))]) as server:  # the endpoint is back: the rerun goes on after them
        records = run_stream(graph_for(server.url), tasks, settings=settings, records_path=records_path,
                             context=Context(namespace=namespace, budget=1))
    assert [r.task_id for r in records] == ["l1_relu", "l1_add", "l1_sigmoid", "l1_gelu"]
    assert records[-1].failure is None


def test_an_authentication_failure_stops_at_once_with_one_error(graph_for, seeded, namespace: str) -> None:
    with serve([error(401, "invalid api key")]) as server, \
            pytest.raises(ModelError, match="rejected the API key") as caught:
        run(graph_for(server.url), namespace)
    assert len(server.requests) == 1 and "\n" not in str(caught.value)


def test_resume_makes_progress_past_an_oversized_diagnosis_in_the_checkpoint(
        store, cpu_backend, suite, seeded, namespace: str) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    def crash(messages):
        raise RuntimeError("machine lost")

    first = ScriptedChatModel([candidate(example_source("l1_relu")), "short diagnosis", crash])
    saver = InMemorySaver()

    def graph(model):
        return build_graph(models=AgentModels(generator=model), backend=cpu_backend, tasks=partial(find_task, suite),
                           memory_store=store, embeddings=fake_embeddings()).compile(checkpointer=saver)

    with pytest.raises(RuntimeError, match="machine lost"):
        run(graph(first), namespace, task_id="l1_add", budget=2)
    crashed = graph(first)
    config = {"configurable": {"thread_id": f"{namespace}-l1_add"}}
    crashed.update_state(config, {"diagnosis": "An old, unbounded diagnosis. " * 5000})  # as older versions kept

    def small_enough(messages):
        assert sum(len(str(m.content)) for m in messages) < 40_000, "the prompt grew with the diagnosis"
        return candidate(SLOW)(messages)

    resumed = ScriptedChatModel([small_enough, "- lesson"])
    state = run(graph(resumed), namespace, task_id="l1_add", budget=2)
    assert state["result"] is not None and len(state["attempts"]) == 2
    prompt = next(m for m in resumed.requests[0] if isinstance(m, HumanMessage)).content
    assert "characters left out" in prompt
