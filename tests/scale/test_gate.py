"""`--max-model-calls`: the per-endpoint gate never lets more than N calls be in flight, and takes back the
permit of a holder that died."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kernelsage.scale.gate import gate_name, open_gate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="kernelsage-gate-tests")
    yield ray
    ray.shutdown()


def _holder(gate: Any, name: str, seconds: float) -> float:
    """A stand-in for one model call: hold a permit for `seconds`; returns when it got it."""
    import ray

    ray.get(gate.acquire.remote(name))
    got = time.time()
    time.sleep(seconds)
    ray.get(gate.release.remote(name))
    return got


def test_no_more_than_the_limit_in_flight(ray_cluster: Any) -> None:
    gate = open_gate(ray_cluster, "http://gate.test/v1", 2, lease_s=60)
    hold = ray_cluster.remote(num_cpus=0)(_holder)
    started = ray_cluster.get([hold.remote(gate, f"call-{n}", 0.5) for n in range(6)])
    assert ray_cluster.get(gate.most_held.remote()) == 2
    assert max(started) - min(started) >= 0.9  # six calls two at a time: three waves half a second apart


def test_one_gate_per_endpoint_and_a_dead_holders_permit_comes_back(ray_cluster: Any) -> None:
    gate = open_gate(ray_cluster, "http://other.test/v1", 1, lease_s=1.0)
    assert open_gate(ray_cluster, "http://other.test/v1", 5, lease_s=60)._actor_id == gate._actor_id
    assert gate_name("http://a/v1") != gate_name("http://b/v1")
    before = time.monotonic()  # the lease starts after this, whenever its grant's reply arrives
    ray_cluster.get(gate.acquire.remote("died-holding-it"))  # never released
    start = time.monotonic()
    ray_cluster.get(gate.acquire.remote("next"), timeout=30)
    assert time.monotonic() - before >= 0.9 and time.monotonic() - start < 10
