"""What `--ray` accepts and refuses, each in one line before anything heavy loads; Ray never imported
without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.scale.cluster import (
    RayTarget,
    forwarded_environment,
    multi_host_problem,
    ray_target,
    worker_secrets,
)


def test_the_addresses_ray_accepts() -> None:
    assert ray_target(None) is None
    assert ray_target("local", cpus=4) == RayTarget(address="local", cpus=4)
    assert ray_target("auto") == RayTarget(address="auto")
    assert ray_target("10.0.0.1:6379").address == "10.0.0.1:6379"
    assert ray_target("ray://head:10001").address == "ray://head:10001"
    for bad, words in (("nowhere", "give local, auto"), ("  ", "needs a value")):
        with pytest.raises(ConfigurationError, match=words):
            ray_target(bad)
    with pytest.raises(ConfigurationError, match="--ray-cpus"):
        ray_target("auto", cpus=2)
    assert ray_target("10.0.0.1:6379", insecure=True).insecure
    with pytest.raises(ConfigurationError, match="--ray-insecure"):
        ray_target("local", insecure=True)


def test_several_hosts_need_a_database_every_host_reaches() -> None:
    one_host = [{"Alive": True, "NodeManagerAddress": "10.0.0.1"}, {"Alive": True, "NodeManagerAddress": "10.0.0.1"}]
    two_hosts = [*one_host, {"Alive": True, "NodeManagerAddress": "10.0.0.2"},
                 {"Alive": False, "NodeManagerAddress": "10.0.0.3"}]
    assert multi_host_problem(one_host, None) is None  # several raylets of one host: the embedded server serves them
    assert multi_host_problem(two_hosts, "postgresql://u:p@db.example:5432/memory?sslmode=require") is None
    for url, words in ((None, "DATABASE_URL is not set"),
                       ("postgresql://postgres:@/postgres?host=/tmp/pgdata", "Unix socket"),
                       ("postgresql:///memory", "Unix socket"),
                       ("postgresql://u@localhost:5432/memory", "loopback address localhost"),
                       ("host=127.0.0.1 dbname=memory", "loopback address 127.0.0.1")):
        problem = multi_host_problem(two_hosts, url)
        assert problem is not None and "2 hosts" in problem and words in problem and "\n" not in problem, problem


def test_the_worker_environment_carries_settings_not_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSAGE_MODEL_BASE_URL", "http://m/v1")
    monkeypatch.setenv("DATABASE_URL", "postgresql://db/x")
    monkeypatch.setenv("SOME_OTHER_SECRET", "x")
    monkeypatch.setenv("KERNELSAGE_MODEL_API_KEY", "sk-x")
    forwarded, secrets = forwarded_environment(), worker_secrets()
    assert forwarded["KERNELSAGE_MODEL_BASE_URL"] == "http://m/v1"
    assert secrets["DATABASE_URL"] == "postgresql://db/x" and secrets["KERNELSAGE_MODEL_API_KEY"] == "sk-x"
    assert not set(forwarded) & set(secrets)  # a credential goes one way only, never in the runtime environment
    assert "SOME_OTHER_SECRET" not in forwarded and "SOME_OTHER_SECRET" not in secrets


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL)


def test_without_the_extra_the_command_names_it_in_one_line(no_ray_path: str) -> None:
    for args in (["compare", "--model", "openai:m", "--ray", "local"], ["simulate", "--ray", "local"]):
        result = _run(args, PYTHONPATH=no_ray_path, KERNELSAGE_MODEL_API_KEY="sk-test")
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == "error: --ray needs Ray, which is not installed: pip install 'kernelsage[ray]'"


def test_a_bad_address_is_refused_in_one_line(tmp_path: Path) -> None:
    result = _run(["run", "--model", "openai:m", "--ray", "nowhere"], KERNELSAGE_MODEL_API_KEY="sk-test")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--ray nowhere" in result.stderr


def test_importing_the_commands_does_not_import_ray() -> None:
    code = "import sys, kernelsage.cli, kernelsage.evals.experiment; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
