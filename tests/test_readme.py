"""The README's Python examples, run as written against the test database.

Only the chat model is replaced: `make_chat_model` returns the labelled scripted test double, which
answers every writing prompt with the CPU backend's reference kernel for the task in the prompt.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from kernelsage.models.scripted import ScriptedChatModel
from tests.graph.scripts import candidate, example_source

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLE_TASKS = ("l2_softmax", "l1_relu")


def section_code(heading: str) -> list[str]:
    """The ```python blocks under one `## ` heading of the README."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 3)
    return re.findall(r"```python\n(.*?)```", text[start: end if end > 0 else None], re.DOTALL)


def reference_kernel_answer(messages: list[BaseMessage]) -> Any:
    prompt = str(messages[-1].content)
    task = next((t for t in EXAMPLE_TASKS if t in prompt), EXAMPLE_TASKS[0])
    return candidate(example_source(task), adopt=lambda ids: set(ids[:1]))(messages)


@pytest.fixture
def readme_globals(monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path) -> dict[str, Any]:
    pytest.importorskip("sentence_transformers", reason="the README uses the local embedding model")
    import kernelsage.models.factory as factory

    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("KERNELSAGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(factory, "make_chat_model", lambda spec, **_: ScriptedChatModel([reference_kernel_answer] * 40))
    return {"__name__": "readme_example"}


@pytest.mark.slow
def test_the_embedding_and_extending_examples_run_as_written(readme_globals: dict[str, Any],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    embed, extend = section_code("Embed the graph in your own LangGraph deployment")[0], \
        section_code("Extending the graph")[0]
    exec(compile(embed, "README.md (embed)", "exec", dont_inherit=True), readme_globals)
    outcome = readme_globals["episode_outcome"](readme_globals["final"])
    assert outcome.task_id == "l2_softmax" and outcome.solved and outcome.first_correct_round == 1
    exec(compile(extend, "README.md (extending)", "exec", dont_inherit=True), readme_globals)
    assert readme_globals["final"]["audit"] == ["round 1: ok, correct=True", "round 2: ok, correct=True"]
    assert "round 2: ok, correct=True" in capsys.readouterr().out


@pytest.mark.slow
def test_the_memory_example_runs_as_written(readme_globals: dict[str, Any]) -> None:
    code = section_code("The memory")[0]
    exec(compile(code, "README.md (memory)", "exec", dont_inherit=True), readme_globals)
    shown = readme_globals["shown"]
    assert shown.hot_version >= 0 and all(entry.tier in ("hot", "cold") for entry in shown.shown)
