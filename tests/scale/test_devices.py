"""The device pool on a local Ray cluster: a profile holds its device alone, and a dead evaluator is replaced.

Real evaluators: the CPU backend compiles the shipped ReLU kernel and verifies and profiles it in its sandbox."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.scale.devices import PooledBackend, device_plan, start_pool
from kernelsage.tools.results import Candidate
from tests.graph.scripts import example_source

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="kernelsage-tests")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def relu(cpu_backend: Any) -> Any:
    built = cpu_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": example_source("l1_relu")}))
    assert built.ok, built.log
    return built.artifact


def _cpu_pool(ray: Any, slots: int) -> Any:
    plan = device_plan("cpu", ray.cluster_resources(), slots)
    assert plan.count == slots
    return start_pool(ray, plan, backend="cpu", suite="builtin", suite_format="auto")


def test_no_two_profiles_overlap_on_one_device(ray_cluster: Any, relu: Any) -> None:
    pool = _cpu_pool(ray_cluster, slots=2)
    receipts = ray_cluster.get([pool.run.remote("profile", "l1_relu", relu, None) for _ in range(6)])
    assert all(r.result.ok for r in receipts), [r.result.message for r in receipts]
    assert {r.device for r in receipts} == {0, 1}  # both devices served (the pool runs jobs side by side)
    for one, other in combinations(receipts, 2):
        if one.device == other.device:
            assert one.ended <= other.started or other.ended <= one.started, (one, other)
    overlapping = any(a.started < b.ended and b.started < a.ended for a, b in combinations(receipts, 2))
    assert overlapping, "the two devices never worked at the same time"


def test_a_dead_evaluator_is_replaced_and_the_job_still_runs(ray_cluster: Any, relu: Any) -> None:
    pool = _cpu_pool(ray_cluster, slots=1)
    first = ray_cluster.get(pool.pids.remote())[0]
    os.kill(first, signal.SIGKILL)
    receipt = ray_cluster.get(pool.run.remote("verify", "l1_relu", relu, None), timeout=180)
    assert receipt.result.correct
    assert receipt.pid != first


def test_the_pooled_backend_compiles_here_and_verifies_on_the_pool(ray_cluster: Any, cpu_backend: Any,
                                                                  suite: Any) -> None:
    pool = _cpu_pool(ray_cluster, slots=1)
    backend = PooledBackend(cpu_backend, pool)
    built = backend.compile(Candidate(task_id="l1_leaky_relu", files={"kernel.cpp": example_source("l1_relu")}))
    assert built.ok
    verdict = backend.verify(built.artifact, suite.get("l1_leaky_relu"))
    assert not verdict.correct  # a ReLU is no leaky ReLU: the pool judged the real kernel on the real task
    (pid,) = ray_cluster.get(pool.pids.remote())
    assert pid != os.getpid()


def test_each_backend_gets_its_devices_or_a_one_line_refusal() -> None:
    assert device_plan("cpu", {"CPU": 8.0}, 3).count == 3
    npu = device_plan("ascend", {"CPU": 192.0, "NPU": 16.0}, 1)
    assert (npu.count, npu.resources["resources"]) == (16, {"NPU": 1})
    assert device_plan("triton", {"GPU": 8.0}, 1).resources["num_gpus"] == 1
    with pytest.raises(ConfigurationError, match="offers no NPU"):
        device_plan("ascend", {"CPU": 8.0}, 1)
