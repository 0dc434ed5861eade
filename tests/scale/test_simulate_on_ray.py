"""`simulate --ray local`: the streams of a study and its sweep spread over Ray workers give the very figures
the sequential study gives (the generator is the simulator's stochastic stand-in, no model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelsage.memory_backend.store import MemoryStore

pytestmark = pytest.mark.slow
STUDY = ("--policies", "sage,uniform", "--orders", "mixed", "--seeds", "2", "--episodes", "12",
         "--sweep", "beta=0,0.4", "--sweep-policies", "sage", "--no-report", "--json")


def _simulate(database_url: str, *args: str, pythonpath: str | None = None) -> dict:
    env = {**os.environ, "DATABASE_URL": database_url}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run([sys.executable, "-m", "kernelsage", "simulate", *STUDY, *args], capture_output=True,
                            text=True, env=env, timeout=400, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)  # the whole of stdout is the JSON document, with Ray running too


def test_simulate_on_ray_gives_the_sequential_figures(database_url: str, store: MemoryStore, no_ray_path: str) -> None:
    before = {n.name for n in store.list_namespaces()}
    sequential = _simulate(database_url, pythonpath=no_ray_path)  # Ray cannot even be imported here
    parallel = _simulate(database_url, "--ray", "local", "--ray-cpus", "2")
    assert parallel == sequential
    assert parallel["invariant_problems"] == [] and len(parallel["sweeps"][0]["policies"]["sage"]) == 2
    assert parallel["policies"]["sage"]["er"]["n"] == 2
    assert {n.name for n in store.list_namespaces()} == before  # every worker removed its stream's namespace
