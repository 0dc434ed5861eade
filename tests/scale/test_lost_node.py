"""A node lost mid-run: `compare --ray ADDRESS` on a two-node cluster (two raylets on this machine's loopback,
token authentication on) whose second node is stopped while one of its streams is in an episode. Ray runs that
stream again on the head, where it resumes; the command ends 0 with every episode committed once and the
verdicts of a clean run. The model is a local OpenAI-compatible TEST DOUBLE (tests.scale.helpers)."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import psutil
import pytest

from kernelsage.scale.access import loopback_only
from tests.models.openai_server import serve
from tests.scale.helpers import (
    InFlight,
    compare_args,
    decided,
    env,
    kernelsage,
    order_file,
    stream_workers,
    summary_counts,
)

pytestmark = pytest.mark.slow
POLICIES = "sage,uniform,none"


@pytest.fixture
def two_nodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A head of 2 CPUs (the driver's node: the evaluator's CPU and room for streams) and a second node of
    1 CPU, both requiring a token that this test makes up, under a temp folder of their own."""
    from ray._private.authentication_test_utils import reset_auth_token_state
    from ray.cluster_utils import Cluster

    ray_tmp = tempfile.mkdtemp(prefix="ks-lost-")  # short: Ray's socket paths live under it
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with monkeypatch.context() as settings:
        settings.setenv("RAY_AUTH_MODE", "token")
        settings.setenv("RAY_AUTH_TOKEN", secrets.token_hex(16))
        reset_auth_token_state()  # this process read Ray's settings when it imported Ray
        with loopback_only():  # both raylets listen on loopback only, as the driver's `--ray 127.0.0.1:...` expects
            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
        try:
            with loopback_only():
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            yield cluster
        finally:
            cluster.shutdown()
    reset_auth_token_state()  # back to the settings of the tests that follow
    shutil.rmtree(ray_tmp, ignore_errors=True)


def _raylet(node: Any) -> int:
    from ray._private import ray_constants

    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def _has_called(pid: int, port: int) -> bool:
    """Whether the process holds a connection to the model server: it has sent its episode's first request."""
    try:
        return any(c.raddr and c.raddr.port == port for c in psutil.Process(pid).net_connections(kind="tcp"))
    except psutil.Error:
        return False


@pytest.fixture
def clean_run(database_url: str, tmp_path: Path) -> Iterator[Callable[[], tuple[subprocess.CompletedProcess, Path]]]:
    """The same compare without Ray, run while the cluster starts (this machine has two cores to share)."""
    work, tag = tmp_path / "clean", uuid.uuid4().hex[:6]
    work.mkdir()
    done: dict[str, subprocess.CompletedProcess] = {}

    def run() -> None:
        with serve([InFlight().behaviour(0.0)]) as server:
            done["clean"] = kernelsage(compare_args(f"clean-{tag}", f"clean-{tag}", order_file(work), POLICIES),
                                       env(database_url, server.url, work), work)

    thread = threading.Thread(target=run)
    thread.start()

    def result() -> tuple[subprocess.CompletedProcess, Path]:
        thread.join(timeout=420)
        return done["clean"], work / "runs" / f"clean-{tag}"
    yield result
    thread.join(timeout=420)


def test_a_lost_node_is_survived(clean_run: Any, two_nodes: Any, database_url: str, tmp_path: Path) -> None:
    run_id = f"lost-{uuid.uuid4().hex[:6]}"
    (second,) = two_nodes.worker_nodes
    nodes = {two_nodes.head_node.node_id: "head", second.node_id: "second"}
    calls = InFlight()
    with serve([calls.behaviour(2.0)]) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        driver = subprocess.Popen(
            [sys.executable, "-m", "kernelsage", *compare_args(run_id, run_id, order_file(tmp_path), POLICIES),
             "--ray", two_nodes.address, "--log-format", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(database_url, server.url, tmp_path),
            cwd=tmp_path, stdin=subprocess.DEVNULL)
        deadline, lost = time.monotonic() + 180, []
        while not lost and time.monotonic() < deadline and driver.poll() is None:
            # A stream of the second node that has sent its first model request is in its first episode (a
            # stream is two episodes of at least one 2 s request each: it cannot finish before the node goes)
            lost = [pid for pid in stream_workers(_raylet(second)) if _has_called(pid, port)]
            time.sleep(0.1)
        assert lost, "no stream started an episode on the second node"
        two_nodes.remove_node(second, allow_graceful=False)  # lost, not drained
        assert _gone(lost, within=20), lost  # the lost stream goes on nowhere but where Ray runs it again
        out, err = driver.communicate(timeout=300)
    assert driver.returncode == 0, err[-3000:]
    placed = [(e["stream"], nodes[e["node"]]) for e in _events(err, "placed")]
    assert {node for _, node in placed} == {"head", "second"}, placed  # the streams were spread over both nodes
    moved = {stream for stream, node in placed if node == "second"}
    assert moved and all((stream, "head") in placed for stream in moved), placed  # and ran again on the head
    clean, clean_dir = clean_run()
    assert clean.returncode == 0, clean.stderr[-3000:]
    run_dir = tmp_path / "runs" / run_id
    assert decided(run_dir) == decided(clean_dir)
    assert summary_counts(out) == summary_counts(clean.stdout)
    _committed_once(database_url, run_dir, json.loads(out)["namespaces"], json.loads(clean.stdout)["namespaces"])


def _gone(pids: list[int], within: float) -> bool:
    """Whether the processes end (a worker notices its raylet is gone in its own time)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            with suppress(psutil.NoSuchProcess):
                alive += [pid] if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else []
        if not alive:
            return True
        time.sleep(0.2)
    return False


def _events(stderr: str, name: str) -> list[dict[str, Any]]:
    """The driver's events of one kind (`--log-format json`: one object per line among Ray's own lines)."""
    found = []
    for line in stderr.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == name:
            found.append(event)
    return found


def _committed_once(url: str, run_dir: Path, namespaces: dict[str, str], clean: dict[str, str]) -> None:
    """Each policy's JSONL holds each episode once, and its memory committed as many episodes as the clean
    run's (sage's memory: both)."""
    from kernelsage.memory_backend.store import MemoryStore

    with MemoryStore.connect(url) as store:
        for policy in POLICIES.split(","):
            ids = [json.loads(line)["episode_id"] for line in (run_dir / f"{policy}.jsonl").read_text().splitlines()]
            assert len(ids) == len(set(ids)) == 2, (policy, ids)
            episodes = [store.open(n[policy], read_only=True).stats()["episodes"] for n in (namespaces, clean)]
            assert episodes[0] == episodes[1] and (policy != "sage" or episodes[0] == 2), (policy, episodes)
