from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool

from kernelsage.errors import CassetteMissError, ModelError
from kernelsage.models import RecordingChatModel, ReplayChatModel, ScriptedChatModel, model_name, request_key


@tool
def read_log(attempt: int) -> str:
    """Read the compiler log of an attempt."""
    return f"log {attempt}"


@tool
def read_diff(attempt: int) -> str:
    """Show where the output differs from the reference."""
    return f"diff {attempt}"


PROMPT = [SystemMessage("You write kernels."), HumanMessage("Write add.")]
ANSWER = AIMessage(
    content="```cpp file=kernel.cpp\nint add();\n```",
    usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    response_metadata={"model_name": "glm-4.6", "finish_reason": "stop", "headers": {"x-secret": "no"}},
    id="run-1",
)


def record(tmp_path: Path, responses: list, prompts: list) -> Path:
    cassette = tmp_path / "session.jsonl"
    recorder = RecordingChatModel(ScriptedChatModel(responses), cassette)
    for prompt in prompts:
        recorder.invoke(prompt)
    return cassette


def test_replay_serves_the_recorded_answer(tmp_path: Path) -> None:
    cassette = record(tmp_path, [ANSWER], [PROMPT])

    replayed = ReplayChatModel(cassette).invoke(PROMPT)

    assert replayed.content == ANSWER.content
    assert replayed.usage_metadata == ANSWER.usage_metadata
    assert replayed.response_metadata["model_name"] == "glm-4.6"
    assert "headers" not in replayed.response_metadata  # only the kept subset is written
    assert replayed.id == "run-1"


def test_recorder_returns_the_inner_answer_and_appends_one_line_per_call(tmp_path: Path) -> None:
    cassette = tmp_path / "nested" / "c.jsonl"
    recorder = RecordingChatModel(ScriptedChatModel(["a", "b"]), cassette)

    assert recorder.invoke("one").content == "a"
    assert recorder.invoke("two").content == "b"

    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [line["response"]["content"] for line in lines] == ["a", "b"]
    assert lines[0]["key"] == request_key([HumanMessage("one")])


def test_changed_prompt_is_a_loud_miss(tmp_path: Path) -> None:
    cassette = record(tmp_path, [ANSWER], [PROMPT])
    changed = [SystemMessage("You write kernels."), HumanMessage("Write mul. " + "x" * 500)]

    with pytest.raises(CassetteMissError) as miss:
        ReplayChatModel(cassette).invoke(changed)

    message = str(miss.value)
    assert request_key(changed)[:16] in message
    assert "Write mul." in message and "x" * 200 not in message
    assert "re-record" in message


def test_a_miss_shows_the_lines_that_differ_from_the_nearest_recording(tmp_path: Path) -> None:
    base = "# Diagnose\nThe output differs.\nworst element at index <num>\nThe kernel wrote every element."
    cassette = record(tmp_path, [ANSWER, ANSWER], [PROMPT, [SystemMessage("You write kernels."), HumanMessage(base)]])
    drifted = base.replace("wrote every element", "never wrote some elements")

    with pytest.raises(CassetteMissError) as miss:
        ReplayChatModel(cassette).invoke([SystemMessage("You write kernels."), HumanMessage(drifted)])

    difference = str(miss.value).split("Nearest recorded request differs in:\n", 1)[1].splitlines()
    assert difference == ["-The kernel wrote every element.\",", "+The kernel never wrote some elements.\","]


def test_a_divergence_handler_gets_the_nearest_answer_of_the_same_node_and_hears_what_differed(
        tmp_path: Path) -> None:
    verdict = "# Round <num> of task l2_softmax\nverdict: {}\nWrite the next kernel."
    other_node = [SystemMessage("You diagnose."), HumanMessage("What went wrong?"), AIMessage("hm"),
                  HumanMessage("Say more.")]
    cassette = record(tmp_path, ["next kernel", "diagnosis", "unrelated"],
                      [[SystemMessage("You write kernels."), HumanMessage(verdict.format("ok"))], other_node,
                       [SystemMessage("You write kernels."), HumanMessage("Write mul for task l1_mul.")]])
    heard: list[str] = []
    replay = ReplayChatModel(cassette, on_divergence=heard.append)

    slower = [SystemMessage("You write kernels."), HumanMessage(verdict.format("timeout"))]
    assert replay.invoke(slower).content == "next kernel"  # the same node's nearest recorded request
    assert heard == ["Nearest recorded request differs in:\n-verdict: ok\n+verdict: timeout"]
    with pytest.raises(CassetteMissError):  # no recorded exchange of that shape: still a miss
        replay.invoke([HumanMessage("alone")])
    with pytest.raises(CassetteMissError):  # without a handler a divergence is a miss, as always
        ReplayChatModel(cassette).invoke(slower)


def test_same_request_recorded_twice_is_served_in_order_then_repeats_the_last(tmp_path: Path) -> None:
    cassette = record(tmp_path, ["first", "second"], [PROMPT, PROMPT])
    replay = ReplayChatModel(cassette)

    assert [replay.invoke(PROMPT).content for _ in range(3)] == ["first", "second", "second"]


def test_tool_calling_conversation_round_trips(tmp_path: Path) -> None:
    cassette = tmp_path / "diagnosis.jsonl"
    tool_call = AIMessage(
        content="", tool_calls=[{"name": "read_log", "args": {"attempt": 1}, "id": "call-7"}]
    )
    inner = ScriptedChatModel([tool_call, "the loop bound is off by one"])

    def converse(model) -> list:
        bound = model.bind_tools([read_log])
        history = [HumanMessage("Why did attempt 1 fail?")]
        first = bound.invoke(history)
        history += [first, ToolMessage("error: index 8 out of range", tool_call_id=first.tool_calls[0]["id"])]
        return [first, bound.invoke(history)]

    recorded = converse(RecordingChatModel(inner, cassette))
    replayed = converse(ReplayChatModel(cassette))

    assert inner.bound_tool_names == ["read_log"]  # the recorder forwarded bind_tools
    assert replayed[0].tool_calls == recorded[0].tool_calls
    assert replayed[1].content == recorded[1].content == "the loop bound is off by one"


def test_bound_tool_schemas_are_part_of_the_key(tmp_path: Path) -> None:
    cassette = tmp_path / "tools.jsonl"
    RecordingChatModel(ScriptedChatModel(["ok"]), cassette).bind_tools([read_log]).invoke(PROMPT)
    replay = ReplayChatModel(cassette)

    assert replay.bind_tools([read_log]).invoke(PROMPT).content == "ok"
    with pytest.raises(CassetteMissError, match="0 tools"):
        replay.invoke(PROMPT)
    with pytest.raises(CassetteMissError):
        replay.bind_tools([read_diff]).invoke(PROMPT)
    with pytest.raises(CassetteMissError):
        replay.bind_tools([read_log], tool_choice="any").invoke(PROMPT)


def test_key_covers_tool_call_ids_and_ignores_message_ids() -> None:
    base = [HumanMessage("q", id="a"), ToolMessage("out", tool_call_id="call-1")]
    same = [HumanMessage("q", id="b"), ToolMessage("out", tool_call_id="call-1")]
    other = [HumanMessage("q"), ToolMessage("out", tool_call_id="call-2")]

    assert request_key(base) == request_key(same)
    assert request_key(base) != request_key(other)


def test_async_recording_and_replay(tmp_path: Path) -> None:
    cassette = tmp_path / "async.jsonl"
    recorded = asyncio.run(RecordingChatModel(ScriptedChatModel([ANSWER]), cassette).ainvoke(PROMPT))
    replayed = asyncio.run(ReplayChatModel(cassette).ainvoke(PROMPT))
    assert replayed.content == recorded.content


def test_replay_is_named_as_a_replay(tmp_path: Path) -> None:
    cassette = record(tmp_path, ["x"], [PROMPT])
    replay = ReplayChatModel(cassette)

    assert replay._llm_type == "replay"
    assert model_name(replay) == "replay:session.jsonl"
    assert model_name(replay.bind_tools([read_log])) == "replay:session.jsonl"
    assert replay._get_ls_params()["ls_provider"] == "replay"
    assert model_name(RecordingChatModel(ScriptedChatModel([]), cassette)) == "record:scripted-test-double"


def test_missing_or_corrupt_cassette_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        ReplayChatModel(tmp_path / "absent.jsonl")
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"key": "k", "response": {"content": "x"}}\nnot json\n')
    with pytest.raises(ModelError, match="line 2"):
        ReplayChatModel(corrupt)


class ChatStarts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.models: list[tuple[str, str]] = []

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs) -> None:
        self.models.append((metadata["ls_provider"], metadata["ls_model_name"]))


def test_a_recorded_call_is_traced_once_and_a_replay_says_so(tmp_path: Path) -> None:
    cassette = tmp_path / "traced.jsonl"
    starts = ChatStarts()
    node = RunnableLambda(
        lambda prompt: RecordingChatModel(ScriptedChatModel(["x"]), cassette).invoke(prompt)
    )

    node.invoke("q", config={"callbacks": [starts]})
    ReplayChatModel(cassette).invoke("q", config={"callbacks": [starts]})

    assert starts.models == [
        ("scripted-test-double", "scripted-test-double"),
        ("replay", "replay:traced.jsonl"),
    ]


def test_numbers_and_the_order_of_memory_lines_do_not_change_the_request_key() -> None:
    from langchain_core.messages import HumanMessage

    from kernelsage.models.cassette import request_key

    recorded = [HumanMessage("l1_relu round 3: 0.0123 ms, 12 wrong\n- id 17 (hot rule): tile\n- id 4 (x): unroll")]
    replayed = [HumanMessage("l1_relu round 3: 0.0131 ms, 14 wrong\n- id 4 (x): unroll\n- id 17 (hot rule): tile")]
    other_task = [HumanMessage("l2_relu round 3: 0.0131 ms, 14 wrong\n- id 4 (x): unroll\n- id 17 (hot rule): tile")]
    other_text = [HumanMessage("l1_relu round 3: 0.0131 ms, 14 wrong\n- id 4 (x): unroll\n- id 17 (hot rule): fuse")]
    assert request_key(recorded) == request_key(replayed)
    assert request_key(recorded) != request_key(other_task)
    assert request_key(recorded) != request_key(other_text)
    with_examples = [HumanMessage("- id 4 (x): unroll\n  example: a\n- id 17 (y): tile\n  example: b\nend")]
    reordered = [HumanMessage("- id 17 (y): tile\n  example: b\n- id 4 (x): unroll\n  example: a\nend")]
    swapped = [HumanMessage("- id 17 (y): tile\n  example: a\n- id 4 (x): unroll\n  example: b\nend")]
    assert request_key(with_examples) == request_key(reordered) != request_key(swapped)
    counted = [HumanMessage("998 of 4,096 elements wrong; shape (3,4)")]
    assert request_key(counted) == request_key([HumanMessage("1,024 of 4,096 elements wrong; shape (3,5)")])
    assert request_key(counted) != request_key([HumanMessage("998 of 4,096 elements wrong; shape (3)")])
