"""A cluster spanning two hosts (simulated on this machine: two raylets on two loopback addresses, 127.0.0.1 and
127.0.0.2) is refused in one line when its workers could not all reach the memory database: no DATABASE_URL (the
embedded server serves one host only), or one that names a Unix socket of this host."""

from __future__ import annotations

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.scale.cluster import RayTarget, connected, loopback_only

pytestmark = pytest.mark.slow


def test_two_hosts_need_a_database_both_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.delenv("DATABASE_URL", raising=False)
    with loopback_only():
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.2")
    target = RayTarget(address=cluster.address, insecure=True)  # a test cluster without tokens, on loopback
    try:
        for url, words in ((None, "DATABASE_URL is not set"),
                           ("postgresql://postgres:@/postgres?host=/tmp/pgdata", "Unix socket")):
            if url:
                monkeypatch.setenv("DATABASE_URL", url)
            with pytest.raises(ConfigurationError) as refused, connected(target):
                pass
            assert "2 hosts" in str(refused.value) and words in str(refused.value)
        monkeypatch.setenv("DATABASE_URL", "postgresql://memory.example/kernelsage")
        with connected(target) as ray:  # with one every host reaches, the command goes on
            assert {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]} == {"127.0.0.1", "127.0.0.2"}
    finally:
        cluster.shutdown()
