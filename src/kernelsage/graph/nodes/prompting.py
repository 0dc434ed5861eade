"""Prompt texts and how the state is rendered into them: memory entries, recent attempts, the diagnosis."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from langchain_core.messages import SystemMessage

from kernelsage.graph.records import Attempt, PromptItem
from kernelsage.graph.state import EpisodeState, attempts
from kernelsage.parsing import ANSWER_FORMAT

HISTORY_ATTEMPTS = 3  # the prompt shows only the last few attempts: the history stays bounded


@cache
def prompt_template(name: str) -> str:
    return resources.files("kernelsage.graph.nodes").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def render(name: str, **values: Any) -> str:
    return prompt_template(name).format(**values)


def system_message(backend: str) -> SystemMessage:
    return SystemMessage(render("system", backend=backend, answer_format=ANSWER_FORMAT))


def render_memory(shown: list[PromptItem]) -> str:
    """The shown items with their ids, hot rules first; the model answers by these ids."""
    if not shown:
        return "## Memory\nNo memory items are shown this round: give an empty adoption list."
    lines = ["## Memory (declare adopted or not for every id)"]
    for item in shown:
        label = "hot rule" if item.tier == "hot" else f"retrieved, relevance {item.relevance:.2f}"
        lines.append(f"- id {item.id} ({label}): {item.text}")
        if item.code_example:
            example = item.code_example.replace("\n", "\n    ")  # keep the entry one indented block
            lines.append(f"  example:\n    {example}")
    return "\n".join(lines)


def summarise_attempt(attempt: Attempt) -> str:
    text = f"- round {attempt.round} ({attempt.stage}): {attempt.status}"
    if attempt.latency is not None:
        text += f", {attempt.latency * 1e3:.4f} ms per run"
    evaluation = attempt.evaluation
    if evaluation is None:
        return text + (f"; {attempt.detail}" if attempt.detail else "")
    if evaluation.compile.errors:
        first = evaluation.compile.errors[0]
        text += f"; first error line {first.line}: {first.message}"
    elif evaluation.compile.reason:
        text += f"; {evaluation.compile.reason}"
    if evaluation.verify is not None and evaluation.verify.message:
        text += f"; {evaluation.verify.message}"
    return text


def render_history(state: EpisodeState) -> str:
    parts = []
    recent = attempts(state)[-HISTORY_ATTEMPTS:]
    if recent:
        parts.append("## Recent attempts\n" + "\n".join(summarise_attempt(a) for a in recent))
    if state.get("diagnosis"):
        parts.append("## Diagnosis of the last failure\n" + str(state["diagnosis"]))
    return "\n\n".join(parts)


def code_blocks(files: dict[str, str]) -> str:
    """Candidate files as the fenced blocks the answer format uses."""
    return "\n\n".join(f"```cpp file={name}\n{source}\n```" for name, source in files.items())
