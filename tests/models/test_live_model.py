"""One episode end to end against a real OpenAI-compatible server on localhost (docs/models.md): the real
factory, the real prompts, a real model's answers, the real backend and memory, and the stream's record.

Skipped unless KERNELSAGE_LIVE_MODEL_URL names the server (e.g. http://127.0.0.1:8080/v1, from
`python -m kernelsage.models.local_server`). KERNELSAGE_LIVE_MODEL sets the model ("openai:<name>", default
"openai:local") and KERNELSAGE_LIVE_BUDGET the rounds (default 2). A small model rarely writes a correct
kernel: the test asserts that whatever it answers ends as recorded round statuses, not that it solves.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from langchain_core.callbacks import BaseCallbackHandler

from kernelsage.evals.records import read_records
from kernelsage.evals.stream import StreamSettings, run_stream
from kernelsage.graph import AgentModels, Context, build_graph
from kernelsage.graph.records import ROUND_FAILURES
from kernelsage.models.factory import make_chat_model
from kernelsage.tasks.loaders import find_task
from kernelsage.tools.results import Status
from tests.graph.fakes import fake_embeddings

LIVE_URL = os.environ.get("KERNELSAGE_LIVE_MODEL_URL", "")
pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not LIVE_URL, reason="set KERNELSAGE_LIVE_MODEL_URL to a model server on localhost"),
]


class PromptLog(BaseCallbackHandler):
    """The prompts every model call of the episode sent (role and text of each message)."""

    def __init__(self) -> None:
        self.prompts: list[list[tuple[str, str]]] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[Any]], **kwargs: Any) -> None:
        self.prompts += [[(m.type, str(m.content)) for m in batch] for batch in messages]


def test_one_episode_against_a_real_model_server(store, cpu_backend, suite, seeded, namespace: str,
                                                 tmp_path: Path) -> None:
    assert urlparse(LIVE_URL).hostname in ("127.0.0.1", "localhost", "::1"), "the live test talks to localhost only"
    spec = os.environ.get("KERNELSAGE_LIVE_MODEL", "openai:local")
    budget = int(os.environ.get("KERNELSAGE_LIVE_BUDGET", "2"))
    model = make_chat_model(spec, base_url=LIVE_URL, api_key=os.environ.get("KERNELSAGE_MODEL_API_KEY", "local"))
    graph = build_graph(models=AgentModels(generator=model), backend=cpu_backend, tasks=partial(find_task, suite),
                        memory_store=store, embeddings=fake_embeddings()).compile()
    prompts = PromptLog()
    settings = StreamSettings(run_id="live", policy="sage", namespace=namespace, model=spec, backend="cpu",
                              budget=budget)
    records_path = tmp_path / "sage.jsonl"
    graph = graph.with_config(callbacks=[prompts])
    run_stream(graph, [find_task(suite, "l1_relu")], settings=settings, records_path=records_path,
               context=Context(namespace=namespace, budget=budget, top_k=2))

    [record] = read_records(records_path)
    known = {status.value for status in Status} | set(ROUND_FAILURES)
    assert record.rounds >= 1 and all(a.status in known for a in record.attempts)
    assert all(a.detail for a in record.attempts if a.status in ROUND_FAILURES)  # each failure says why
    assert record.tokens.input > 0 and record.tokens.output > 0  # the server's own counts
    assert any(a.prompt_tokens for a in record.attempts)
    writing = [p for p in prompts.prompts if any("ks_kernel" in text for _, text in p)]
    assert writing, "no prompt carried the kernel's contract"
    print(f"\nlive episode: {[a.status for a in record.attempts]}, solved={record.solved}, "
          f"{record.seconds:.0f} s, tokens in/out {record.tokens.input}/{record.tokens.output}, "
          f"failure={record.failure}")
