"""A cluster of two nodes (two simulated on this machine) without DATABASE_URL is refused in one line: the
embedded memory database serves one host only."""

from __future__ import annotations

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.scale.cluster import RayTarget, connected

pytestmark = pytest.mark.slow


def test_two_nodes_without_a_shared_database_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.delenv("DATABASE_URL", raising=False)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    try:
        with pytest.raises(ConfigurationError) as refused, connected(RayTarget(address=cluster.address)):
            pass
        assert "2 nodes" in str(refused.value) and "DATABASE_URL" in str(refused.value)
        monkeypatch.setenv("DATABASE_URL", "postgresql://memory.example/kernelsage")
        with connected(RayTarget(address=cluster.address)) as ray:  # with one, the command goes on
            assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    finally:
        cluster.shutdown()
