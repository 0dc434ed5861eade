"""The cluster `--ray local` starts is no open door: every process of it listens on loopback only, it keeps its
session in a temp folder of its own, and no secret of the driver's (model key, LangSmith key, database password)
is in the job's runtime environment, which Ray keeps in its control store for the dashboard and the state API,
or in any file of the session; the secrets still reach a stream's worker, as a task argument."""

from __future__ import annotations

import ipaddress
import subprocess
from typing import Any

import psutil
import pytest

from kernelsage.scale.access import checks_no_token, is_loopback
from kernelsage.scale.cluster import RayTarget, adopt_secrets, connected, worker_secrets

pytestmark = pytest.mark.slow
SECRETS = {"KERNELSAGE_MODEL_API_KEY": "sk-model-7f3a9c", "LANGSMITH_API_KEY": "lsv2-langsmith-51c0",
           "DATABASE_URL": "postgresql://writer:pw-database-e2d4@db.example:5432/memory"}


def _listening(root: psutil.Process) -> list[tuple[str, str]]:
    found = []
    for process in [root, *root.children(recursive=True)]:
        try:
            found += [(process.name(), c.laddr.ip) for c in process.net_connections(kind="inet")
                      if c.status == psutil.CONN_LISTEN]
        except psutil.Error:
            continue
    return found


def _on_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def _in_worker(secrets: dict[str, str]) -> dict[str, str | None]:
    import os

    adopt_secrets(secrets)
    return {name: os.environ.get(name) for name in (*SECRETS, "KERNELSAGE_MODEL_BASE_URL")}


def _runtime_environments(ray: Any) -> list[str]:
    """Each job's runtime environment as the control store keeps it (what the dashboard and state API read)."""
    jobs = ray._private.worker.global_worker.gcs_client.get_all_job_info()
    return [job.config.runtime_env_info.serialized_runtime_env for job in jobs.values()]


def test_a_local_cluster_listens_on_loopback_and_keeps_secrets_out_of_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KERNELSAGE_MODEL_BASE_URL", "http://model.example/v1")
    with connected(RayTarget(address="local", cpus=1)) as ray:
        seen = ray.get(ray.remote(num_cpus=0)(_in_worker).remote(worker_secrets()))
        listening = _listening(psutil.Process())
        session = ray._private.worker._global_node.get_session_dir_path()
        environments = _runtime_environments(ray)
        open_door = checks_no_token(ray)
        leaked = subprocess.run(["grep", "-rlF", *[f"-e{v}" for v in SECRETS.values()], session],
                                capture_output=True, text=True).stdout
    assert seen == {**SECRETS, "KERNELSAGE_MODEL_BASE_URL": "http://model.example/v1"}
    assert len(listening) >= 4, listening  # the control store, the raylet, the driver's and a worker's servers
    assert all(_on_loopback(ip) for _, ip in listening), listening
    assert not open_door  # the started cluster checks tokens (Ray's default for a local cluster, kept)
    assert "/kernelsage-ray-" in session and not session.startswith("/tmp/ray/")
    assert environments and any("model.example" in env for env in environments)  # the settings travel there
    assert not [v for v in SECRETS.values() if any(v in env for env in environments)], environments
    assert leaked == "", leaked


def test_what_counts_as_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("HF_TOKEN", "hf-token")
    monkeypatch.setenv("KERNELSAGE_MODEL", "openai:m")
    monkeypatch.setenv("UNRELATED_PASSWORD", "not forwarded at all")
    assert set(worker_secrets()) >= {*SECRETS, "OPENAI_API_KEY", "HF_TOKEN"}
    assert "KERNELSAGE_MODEL" not in worker_secrets() and "UNRELATED_PASSWORD" not in worker_secrets()


def test_which_addresses_are_loopback() -> None:
    assert all(is_loopback(a) for a in ("127.0.0.1:6379", "localhost:1", "[::1]:6379", "ray://127.0.0.1:10001"))
    assert not any(is_loopback(a) for a in ("10.0.0.1:6379", "auto", "head.example:6379", "ray://10.1.1.1:10001"))
