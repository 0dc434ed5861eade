"""The graph served by `langgraph dev` from langgraph.json, driven by a langgraph-sdk client, offline."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from functools import partial
from pathlib import Path

import pytest

from kernelsage.graph import Context, build_graph
from kernelsage.graph.runner import run_episode
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.models.cassette import RecordingChatModel
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import SLOW, candidate

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    """Stop the server and everything it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def _wait_until_ok(url: str, process: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"langgraph dev exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"langgraph dev did not answer /ok in time:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
def test_langgraph_dev_serves_an_episode_to_an_sdk_client(store: MemoryStore, cpu_backend, suite, database_url: str,
                                                           namespace: str, tmp_path: Path) -> None:
    pytest.importorskip("langgraph_api", reason="langgraph-cli[inmem] (the dev extra) is required")
    from langgraph_sdk import get_sync_client

    # Record the model's answer for an empty memory (so the served prompt is the recorded one) ...
    cassette = tmp_path / "episode.jsonl"
    recorder = RecordingChatModel(inner=ScriptedChatModel([candidate(SLOW)]), path=cassette)
    graph = build_graph(models=recorder, backend=cpu_backend, tasks=partial(find_task, suite), memory_store=store,
                        embeddings=fake_embeddings()).compile()
    run_episode(graph, task_id="l1_relu", level=1, context=Context(namespace=namespace + "-rec", budget=1,
                                                                    seed_knowledge=False),
                backend="cpu", model="recorded")

    # ... then let the server replay it, against the same database, with no network.
    port = _free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "DATABASE_URL": database_url, "KERNELSAGE_MODEL": f"replay:{cassette}",
           "LANGGRAPH_NO_VERSION_CHECK": "1", "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false",
           "KERNELSAGE_CACHE": str(tmp_path / "cache")}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "langgraph"), "dev", "--no-browser", "--no-reload", "--port", str(port),
         "--config", str(ROOT / "langgraph.json")],
        cwd=tmp_path, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ok(url, server, log)
        client = get_sync_client(url=url)
        thread = client.threads.create()
        final = client.runs.wait(thread["thread_id"], "kernelsage", input={"task_id": "l1_relu"},
                                 context={"namespace": namespace + "-served", "policy": "sage", "budget": 1,
                                          "seed_knowledge": False})
    finally:
        _stop(server)
    assert final["result"]["solved"] is True, final
    assert [a["status"] for a in final["attempts"]] == ["ok"]
    assert store.open(namespace + "-served", read_only=True).stats()["episodes"] == 1
