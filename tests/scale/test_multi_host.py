"""A cluster of two nodes (two simulated on this machine, on loopback) without DATABASE_URL is refused in one
line: the embedded memory database serves one host only."""

from __future__ import annotations

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.scale.cluster import RayTarget, connected, loopback_only

pytestmark = pytest.mark.slow


def test_two_nodes_without_a_shared_database_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.delenv("DATABASE_URL", raising=False)
    with loopback_only():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        cluster.add_node(num_cpus=1)
    target = RayTarget(address=cluster.address, insecure=True)  # a test cluster without tokens, on loopback
    try:
        with pytest.raises(ConfigurationError) as refused, connected(target):
            pass
        assert "2 nodes" in str(refused.value) and "DATABASE_URL" in str(refused.value)
        monkeypatch.setenv("DATABASE_URL", "postgresql://memory.example/kernelsage")
        with connected(target) as ray:  # with one, the command goes on
            assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    finally:
        cluster.shutdown()
