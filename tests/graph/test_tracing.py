"""Tracing with the real LangSmith client: an episode's run tree arrives at a local HTTP collector.

The episode runs in a child process whose environment points the LangSmith SDK at the collector
(LANGSMITH_ENDPOINT on localhost, a dummy key), as a user's shell would; the chat model is the labelled
scripted test double. The test then checks the run tree where the README says each record is.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

EPISODE = """
import os
from functools import partial

from langchain_core.tracers.langchain import wait_for_all_tracers

from kernelsage.graph import AgentModels, Context, build_graph
from kernelsage.graph.runner import run_episode
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.backend import get_backend
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import candidate, example_source

namespace = os.environ["TEST_NAMESPACE"]
model = ScriptedChatModel([candidate(example_source("l1_relu"), adopt=lambda ids: set(ids[:1]))] * 6)
with MemoryStore.connect(os.environ["DATABASE_URL"]) as store, get_backend("cpu", trials=2, reps=20) as backend:
    graph = build_graph(models=AgentModels(generator=model), backend=backend,
                        tasks=partial(find_task, load_suite("builtin")), memory_store=store,
                        embeddings=fake_embeddings())
    run_episode(graph.compile(), task_id="l1_relu", level=1, backend="cpu", model="scripted-test-double",
                context=Context(namespace=namespace, policy="sage", budget=2), episode_id=namespace + "-episode")
wait_for_all_tracers()
"""


class Collector:
    """What the LangSmith client sent, merged into one record per run id."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.requests: list[str] = []
        self.lock = threading.Lock()

    def merge(self, run_id: str, fields: dict[str, Any]) -> None:
        with self.lock:
            run = self.runs.setdefault(run_id, {})
            for key, value in fields.items():
                if value is not None:
                    run[key] = value

    def take(self, path: str, headers: Any, body: bytes) -> None:
        self.requests.append(path)
        if headers.get("Content-Encoding") == "zstd":
            import zstandard

            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        content_type = headers.get("Content-Type", "")
        if content_type.startswith("multipart/"):
            message = email.message_from_bytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body,
                                               policy=email.policy.HTTP)
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition") or ""
                payload = json.loads(part.get_payload(decode=True) or b"null")
                _, run_id, *field = name.split(".")
                self.merge(run_id, {field[0]: payload} if field else payload)
        elif content_type.startswith("application/json") and body:
            data = json.loads(body)
            if path.endswith("/runs/batch"):
                for run in [*data.get("post", []), *data.get("patch", [])]:
                    self.merge(run["id"], run)
            elif "id" in data or path.startswith("/runs/"):
                self.merge(data.get("id") or path.rsplit("/", 1)[-1], data)


@contextmanager
def serving() -> Iterator[tuple[Collector, str]]:
    """A local HTTP collector that answers what the LangSmith client asks and keeps what it sends."""
    received = Collector()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer({"version": "test-collector", "batch_ingest_config": {}} if self.path.endswith("/info")
                         else {})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            received.take(self.path, self.headers, self.rfile.read(length))
            self._answer({})

        do_PATCH = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield received, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _children(runs: dict[str, dict[str, Any]], parent: str) -> list[dict[str, Any]]:
    return [run for run in runs.values() if run.get("parent_run_id") == parent]


@pytest.fixture(scope="module")
def traced(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, dict[str, Any]], str]:
    """One episode traced to the collector: (the runs by id, the episode id)."""
    namespace = f"trace-{uuid.uuid4().hex[:12]}"
    with serving() as (received, url):
        env = {**os.environ, "LANGSMITH_TRACING": "true", "LANGSMITH_ENDPOINT": url,
               "LANGSMITH_API_KEY": "dummy-key", "LANGSMITH_PROJECT": "kernelsage-test", "DATABASE_URL": database_url,
               "TEST_NAMESPACE": namespace, "KERNELSAGE_CACHE": str(tmp_path_factory.mktemp("cache")),
               "PYTHONPATH": str(ROOT)}
        env.pop("LANGCHAIN_TRACING_V2", None)
        result = subprocess.run([sys.executable, "-c", EPISODE], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert received.runs, f"nothing arrived at the collector (requests: {received.requests})"
    return received.runs, f"{namespace}-episode"


def _model_calls(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {run["name"]: run for run in runs.values() if run.get("run_type") == "llm"}


@pytest.mark.slow
def test_an_episode_run_tree_arrives_with_the_records_where_the_readme_says(
        traced: tuple[dict[str, dict[str, Any]], str]) -> None:
    runs, episode_id = traced

    # The episode: the root run, named after the operator, with the run's settings in its metadata.
    roots = [run for run in runs.values() if run.get("name") == "kernelsage episode l1_relu"]
    assert len(roots) == 1, sorted({r.get("name", "?") for r in runs.values()})
    root = roots[0]
    assert root.get("parent_run_id") is None
    metadata = root["extra"]["metadata"]
    assert metadata["operator"] == "l1_relu" and metadata["level"] == 1
    assert metadata["episode_id"] == episode_id and metadata["policy"] == "sage"
    assert metadata["namespace"] == episode_id.removesuffix("-episode") and metadata["backend"] == "cpu"
    assert metadata["model"] == "scripted-test-double"
    assert "policy:sage" in root.get("tags", [])

    # Every run of the tree belongs to the episode's trace; the nodes are its children.
    in_trace = [run for run in runs.values() if run.get("trace_id") == root["trace_id"]]
    assert len(in_trace) == len(runs)
    nodes = {run["name"] for run in _children(runs, root["id"])}
    assert {"start", "retrieve", "generator", "adoption_gate", "evaluate", "finish", "curator"} <= nodes

    # Model calls: named by role and round, with the round and the stage in their metadata; the episode's
    # settings are inherited.
    calls = _model_calls(runs)
    writers = [run for run in calls.values() if run["extra"]["metadata"]["role"] in ("generator", "optimizer")]
    assert [run["extra"]["metadata"]["stage"] for run in writers] == ["draft", "refine"], sorted(calls)
    for run in writers:
        call_metadata = run["extra"]["metadata"]
        assert isinstance(call_metadata["round"], int) and run["name"].endswith(f"round {call_metadata['round']}")
        assert call_metadata["operator"] == "l1_relu" and call_metadata["episode_id"] == episode_id
        assert call_metadata["policy"] == "sage" and run["trace_id"] == root["trace_id"]

    # The adoption records: in the adoption gate's output, one per shown item, with state and rationale.
    gate = next(run for run in in_trace if run.get("name") == "adoption_gate" and run.get("outputs"))
    exposures = gate["outputs"]["adoption"]
    assert exposures and all({"item_id", "adopted", "rationale", "round"} <= set(e) for e in exposures)
    assert any(e["adopted"] for e in exposures)

    # The curator's output holds the credits (ATU), keyed by item id.
    curator = next(run for run in in_trace if run.get("name") == "curator" and run.get("outputs"))
    update = curator["outputs"]["memory_update"]
    assert update["updated"] and update["policy"] == "sage" and update["credits"]
    adopted = {str(e["item_id"]) for e in exposures if e["adopted"]}
    assert adopted <= set(update["credits"])

    # The episode's final output: the outcome and every adoption record of the episode.
    outputs = root["outputs"]
    assert outputs["result"]["task_id"] == "l1_relu" and outputs["result"]["solved"]
    assert len(outputs["adoption"]) >= len(exposures)


@pytest.mark.slow
def test_a_writing_call_is_traced_with_the_round_it_writes(traced: tuple[dict[str, dict[str, Any]], str]) -> None:
    calls = _model_calls(traced[0])
    assert calls["generator round 1"]["extra"]["metadata"]["round"] == 1
    assert calls["optimizer round 2"]["extra"]["metadata"]["round"] == 2
