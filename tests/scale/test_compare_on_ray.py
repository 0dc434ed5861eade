"""`compare --ray local`: the same records, counts and --json summary as the sequential command, with each
policy's stream in its own Ray worker; a worker killed mid-episode changes nothing but the time taken.

The model is a local OpenAI-compatible TEST DOUBLE (see tests.scale.helpers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.models.openai_server import serve
from tests.scale.helpers import (
    InFlight,
    compare_args,
    decided,
    env,
    kernelsage,
    order_file,
    run_watching_streams,
    stream_workers,
    summary_counts,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sequential(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sequential compare every Ray run is held against, run where importing Ray fails (so without
    --ray Ray is never imported)."""
    work = tmp_path_factory.mktemp("sequential")
    poisoned = work / "poisoned" / "ray"
    poisoned.mkdir(parents=True)
    (poisoned / "__init__.py").write_text("raise ImportError('ray is poisoned in this test')\n")
    tag = uuid.uuid4().hex[:6]
    calls = InFlight()
    with serve([calls.behaviour(0.2)]) as server:
        result = kernelsage(compare_args(f"seq-{tag}", f"ns-{tag}", order_file(work), budget=2),
                            {**env(database_url, server.url, work), "PYTHONPATH": str(poisoned.parent)}, work)
    assert result.returncode == 0, result.stderr[-3000:]
    assert calls.most == 1
    return {"run_dir": work / "runs" / f"seq-{tag}", "stdout": result.stdout, "namespace": f"ns-{tag}",
            "run_id": f"seq-{tag}"}


def test_parallel_compare_equals_sequential(sequential: dict[str, Any], database_url: str, tmp_path: Path) -> None:
    calls = InFlight()
    with serve([calls.behaviour(0.3)]) as server:
        parallel, streams_at_once = run_watching_streams(
            [*compare_args("par", sequential["namespace"], order_file(tmp_path), budget=2), "--ray", "local",
             "--ray-cpus", "2"], env(database_url, server.url, tmp_path), tmp_path)
    assert parallel.returncode == 0, parallel.stderr[-3000:]
    assert streams_at_once == 2, "the two policies' streams never ran at the same time"
    assert decided(tmp_path / "runs" / "par") == decided(sequential["run_dir"])
    assert summary_counts(parallel.stdout) == summary_counts(sequential["stdout"]) == {"sage": (1, 2, 4, 4),
                                                                                      "none": (1, 2, 4, 4)}
    ray_json, seq_json = json.loads(parallel.stdout), json.loads(sequential["stdout"])
    assert set(ray_json) == set(seq_json) and list(ray_json["summary"]) == list(seq_json["summary"])
    assert ray_json["namespaces"] == {p: f"{sequential['namespace']}@par/{p}" for p in ("sage", "none")}
    assert (tmp_path / "runs" / "par" / "report" / "report.md").is_file()


def test_a_stream_worker_killed_mid_episode_changes_no_count(sequential: dict[str, Any], database_url: str,
                                                             tmp_path: Path) -> None:
    calls = InFlight()
    with serve([calls.behaviour(1.0)]) as server:
        driver = subprocess.Popen(
            [sys.executable, "-m", "kernelsage", *compare_args("killed", sequential["namespace"],
                                                               order_file(tmp_path), budget=2),
             "--ray", "local", "--ray-cpus", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(database_url, server.url, tmp_path),
            cwd=tmp_path, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 240
        # Mid-episode (a stream on its second round), with both streams' workers up: three calls alone could
        # all be one stream's while the other's worker still starts.
        while ((calls.total < 3 or len(stream_workers(driver.pid)) < 2)
               and time.monotonic() < deadline and driver.poll() is None):
            time.sleep(0.1)
        workers = stream_workers(driver.pid)
        if driver.poll() is not None:
            pytest.fail(f"the command ended before its streams ran (exit {driver.returncode}): "
                        f"{driver.stderr.read()[-3000:] if driver.stderr else ''}")
        assert len(workers) == 2, workers
        os.kill(min(workers), signal.SIGKILL)
        out, err = driver.communicate(timeout=420)
    assert driver.returncode == 0, err[-3000:]
    assert "worker died" in err or "killed" in err  # Ray's note went to stderr; stdout is the JSON alone
    assert decided(tmp_path / "runs" / "killed") == decided(sequential["run_dir"])
    assert summary_counts(out) == summary_counts(sequential["stdout"])
    _same_memory(database_url, sequential, "killed")


COUNTS = ("items", "by_state", "hot_tokens", "hot_version", "episodes", "solved_episodes", "adoption_rate")


def _same_memory(url: str, sequential: dict[str, Any], run_id: str) -> None:
    """The memory the killed run left has the counts of the sequential run's: items, their states, episodes
    committed, adoptions per exposure (each episode's effects applied once; utilities follow timings)."""
    from kernelsage.memory_backend.store import MemoryStore

    with MemoryStore.connect(url) as store:
        for policy in ("sage", "none"):
            names = [f"{sequential['namespace']}@{run}/{policy}" for run in (sequential["run_id"], run_id)]
            stats = [store.open(name, read_only=True).stats() for name in names]
            assert [{k: s[k] for k in COUNTS} for s in stats][1] == {k: stats[0][k] for k in COUNTS}, policy
            if policy == "sage":
                assert stats[0]["episodes"] == 2
