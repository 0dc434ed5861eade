"""Pieces every node shares: prompt files, rendering of memory and history, model calls, hashes."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from kernelsage.graph.state import Attempt, EpisodeState, ShownItem
from kernelsage.models.retry import invoke_with_retry

HISTORY_ATTEMPTS = 3  # the prompt shows only the last few attempts: the history stays bounded


@cache
def prompt_template(name: str) -> str:
    return resources.files("kernelsage.graph.nodes").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def render(name: str, **values: Any) -> str:
    return prompt_template(name).format(**values)


def candidate_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def render_memory(shown: list[ShownItem]) -> str:
    """The shown items with their ids, hot rules first; the model answers by these ids."""
    if not shown:
        return "## Memory\nNo memory items are shown this round: give an empty adoption list."
    lines = ["## Memory (declare adopted or not for every id)"]
    for item in shown:
        label = "hot rule" if item["tier"] == "hot" else f"retrieved, relevance {item['relevance']:.2f}"
        lines.append(f"- id {item['id']} ({label}): {item['text']}")
        if item.get("code_example"):
            example = str(item["code_example"]).replace("\n", "\n    ")  # keep the entry one indented block
            lines.append(f"  example:\n    {example}")
    return "\n".join(lines)


def summarise_attempt(attempt: Attempt) -> str:
    text = f"- round {attempt['round']} ({attempt['stage']}): {attempt['status']}"
    if attempt["latency"] is not None:
        text += f", {attempt['latency'] * 1e3:.4f} ms per run"
    compile_result = attempt.get("compile") or {}
    if compile_result.get("errors"):
        first = compile_result["errors"][0]
        text += f"; first error line {first['line']}: {first['message']}"
    elif compile_result.get("reason"):
        text += f"; {compile_result['reason']}"
    verify = attempt.get("verify") or {}
    if verify.get("message"):
        text += f"; {verify['message']}"
    return text


def render_history(state: EpisodeState) -> str:
    parts = []
    attempts = state.get("attempts", [])[-HISTORY_ATTEMPTS:]
    if attempts:
        parts.append("## Recent attempts\n" + "\n".join(summarise_attempt(a) for a in attempts))
    if state.get("diagnosis"):
        parts.append("## Diagnosis of the last failure\n" + str(state["diagnosis"]))
    return "\n\n".join(parts)


def run_config(state: EpisodeState, role: str, model_name: str) -> RunnableConfig:
    """Names and metadata of a model call, for tracing (free when tracing is off)."""
    return RunnableConfig(
        run_name=f"{role} round {state.get('round', 0)}",
        tags=[f"role:{role}", f"stage:{state.get('stage', 'draft')}"],
        metadata={"role": role, "round": state.get("round", 0), "stage": state.get("stage", "draft"),
                  "operator": state.get("operator", state["task_id"]), "episode_id": state.get("episode_id"),
                  "model": model_name},
    )


def call_model(model: BaseChatModel, messages: list[BaseMessage], config: RunnableConfig) -> AIMessage:
    """One model call with retries for transient faults; the answer as an AIMessage."""
    answer = invoke_with_retry(model, messages, config=config)
    return answer if isinstance(answer, AIMessage) else AIMessage(content=str(answer))


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
