"""Which clusters the memory database serves: several raylets of one host share the embedded server (its Unix
socket reaches them all); a cluster spanning hosts needs a DATABASE_URL every host reaches (the rule itself:
tests/scale/test_cluster.py; a second host cannot be made here without a raylet listening past loopback: Ray
binds a node of any address other than 127.0.0.1 on every interface)."""

from __future__ import annotations

import pytest

from kernelsage.scale.access import loopback_only
from kernelsage.scale.cluster import RayTarget, connected

pytestmark = pytest.mark.slow


def test_two_raylets_of_one_host_share_the_embedded_database(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.delenv("DATABASE_URL", raising=False)
    with loopback_only():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        cluster.add_node(num_cpus=1)
    try:
        with connected(RayTarget(address=cluster.address, insecure=True)) as ray:  # a test cluster, no tokens
            alive = [n for n in ray.nodes() if n["Alive"]]
            assert len(alive) == 2 and {n["NodeManagerAddress"] for n in alive} == {"127.0.0.1"}
    finally:
        cluster.shutdown()
