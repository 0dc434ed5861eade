"""Prompt texts and how the state is rendered into them: memory entries, recent attempts, the diagnosis."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from langchain_core.messages import SystemMessage

from kernelsage.graph.nodes.bounds import MAX_CODE_CHARS, MAX_DIAGNOSIS_CHARS, MAX_SUMMARY_CHARS, bound
from kernelsage.graph.records import Attempt, PromptItem
from kernelsage.graph.state import EpisodeState, attempts
from kernelsage.parsing import ANSWER_FORMAT
from kernelsage.tools.diagnostics import first_error as compiler_first_error
from kernelsage.tools.results import CompilerMessage

HISTORY_ATTEMPTS = 3  # the prompt shows only the last few attempts: the history stays bounded
COMPACT_ITEM_CHARS = 300  # a memory item's text in a prompt shrunk to fit the model's window


@cache
def prompt_template(name: str) -> str:
    return resources.files("kernelsage.graph.nodes").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def render(name: str, **values: Any) -> str:
    return prompt_template(name).format(**values)


def system_message(backend: str) -> SystemMessage:
    return SystemMessage(render("system", backend=backend, answer_format=ANSWER_FORMAT))


def render_memory(shown: list[PromptItem], *, compact: bool = False) -> str:
    """The shown items with their ids, hot rules first; the model answers by these ids. `compact` keeps
    each item short and leaves out code examples (a prompt shrunk to fit the model's window)."""
    if not shown:
        return "## Memory\nNo memory items are shown this round: give an empty adoption list."
    lines = ["## Memory (declare adopted or not for every id)"]
    for item in shown:
        label = "hot rule" if item.tier == "hot" else f"retrieved, relevance {item.relevance:.2f}"
        text = bound(item.text, COMPACT_ITEM_CHARS) if compact else item.text
        lines.append(f"- id {item.id} ({label}): {text}")
        if item.code_example and not compact:
            example = item.code_example.replace("\n", "\n    ")  # keep the entry one indented block
            lines.append(f"  example:\n    {example}")
    return "\n".join(lines)


def first_error(attempt: Attempt) -> CompilerMessage | None:
    """The compiler's first message of severity error (a warning or a note never stands in for one)."""
    return compiler_first_error(attempt.evaluation.compile.errors) if attempt.evaluation is not None else None


def last_log_line(log: str) -> str:
    """The last non-empty line of a compiler log (what it said when no error line could be parsed)."""
    return next((line.strip() for line in reversed(log.splitlines()) if line.strip()), "")


def summarise_attempt(attempt: Attempt) -> str:
    text = f"- round {attempt.round} ({attempt.stage}): {attempt.status}"
    if attempt.latency is not None:
        text += f", {attempt.latency * 1e3:.4f} ms per run"
    evaluation = attempt.evaluation
    if evaluation is None:
        return text + (f"; {attempt.detail}" if attempt.detail else "")
    first = first_error(attempt)
    if first is not None:
        text += f"; first error line {first.line}: {first.message}" if first.line else f"; first error: {first.message}"
    elif evaluation.compile.reason:
        text += f"; {evaluation.compile.reason}"
    elif not evaluation.compile.ok and last_log_line(evaluation.compile.log):
        text += f"; the compiler's output ends: {last_log_line(evaluation.compile.log)}"
    if evaluation.verify is not None and evaluation.verify.message:
        text += f"; {evaluation.verify.message}"
    return bound(" ".join(text.split("\n")), MAX_SUMMARY_CHARS)


def diagnosis_of(state: EpisodeState) -> str:
    """The diagnosis in the state, bounded (an old checkpoint may hold a longer one)."""
    return bound(str(state.get("diagnosis") or "").strip(), MAX_DIAGNOSIS_CHARS)


def render_history(state: EpisodeState, *, compact: bool = False) -> str:
    parts = []
    recent = attempts(state)[-(1 if compact else HISTORY_ATTEMPTS):]
    if recent:
        parts.append("## Recent attempts\n" + "\n".join(summarise_attempt(a) for a in recent))
    diagnosis = diagnosis_of(state)
    if diagnosis:
        parts.append("## Diagnosis of the last failure\n" + (bound(diagnosis, 500) if compact else diagnosis))
    return "\n\n".join(parts)


def code_blocks(files: dict[str, str], limit: int = MAX_CODE_CHARS) -> str:
    """Candidate files as the fenced blocks the answer format uses (each file bounded to `limit`)."""
    return "\n\n".join(f"```cpp file={name}\n{bound(source, limit)}\n```" for name, source in files.items())
