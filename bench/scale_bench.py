"""Scale-out on Ray, measured: wall time of a 3-policy compare against a STAND-IN model server that answers
after a fixed delay (bench/standin_model.py; not a model), sequential vs `--ray local`, and on a cluster of
two nodes (two raylets on this machine, token authentication on) with where each stream ran; and the
simulator's study (stochastic stand-in generator) sequential and with 1, 2 and 4 Ray CPUs. Each command runs
as a user runs it, in its own process, on a fresh embedded database. Figures, not assertions (docs/scale.md).

    .venv/bin/python bench/scale_bench.py --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from standin_model import standin_server

POLICIES = "sage,uniform,none"
TASKS = ("l1_relu", "l1_leaky_relu", "l1_sigmoid")


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    return _run(args, env, cwd)[0]


def _run(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    """The command's wall time, and its stderr."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True, env=env,
                            cwd=cwd, stdin=subprocess.DEVNULL)
    # 1 is a run that judged kernels failed; a crash exits 1 too, with its traceback
    if result.returncode not in (0, 1) or "Traceback (most recent call last)" in result.stderr:
        raise SystemExit(f"{' '.join(args[:2])} failed ({result.returncode}): {result.stderr[-2000:]}")
    return time.perf_counter() - start, result.stderr


@contextmanager
def two_nodes(env: dict[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray cluster of two nodes on this machine (a head of 2 CPUs: the driver's, holding the evaluator;
    a second of 1), requiring a token made up here, under a temp folder of its own; yields its address and
    the names of its nodes by id. `env` gets the settings a driver needs to join it."""
    ray_tmp = tempfile.mkdtemp(prefix="ks-bench-")  # short: Ray's socket paths live under it
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16), RAY_TMPDIR=ray_tmp)
    os.environ.update({k: env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_TMPDIR")})  # before Ray loads
    from ray.cluster_utils import Cluster

    from kernelsage.scale.access import loopback_only

    with loopback_only():  # the bench's cluster listens on this machine's loopback only
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    try:
        with loopback_only():
            second = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster.address, {cluster.head_node.node_id: "head", second.node_id: "second"}
    finally:
        cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)


def nodes_per_stream(stderr: str, names: dict[str, str]) -> dict[str, list[str]]:
    """Where each stream ran, in order (a stream run again elsewhere has two), from the driver's `placed`
    events (`--log-format json`)."""
    found: dict[str, list[str]] = {}
    for line in stderr.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "placed":
            found.setdefault(event["stream"], []).append(names.get(event["node"], event["node"][:12]))
    return found


def _spread(times: list[float]) -> str:
    return f"{statistics.median(times):.1f} s (min {min(times):.1f}, max {max(times):.1f}, n={len(times)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--delay", type=float, default=3.0, help="seconds the stand-in waits before each answer")
    parser.add_argument("--budget", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=60, help="episodes per simulated stream")
    parser.add_argument("--skip-compare", action="store_true", help="skip the compare sequential / --ray local")
    parser.add_argument("--skip-two-nodes", action="store_true", help="skip the compare on a two-node cluster")
    parser.add_argument("--skip-simulate", action="store_true")
    options = parser.parse_args()
    import pgserver

    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    server = pgserver.get_server(work / "db", cleanup_mode="delete")
    env = {**os.environ, "DATABASE_URL": server.get_uri(), "HF_HUB_OFFLINE": "1", "KERNELSAGE_MODEL_API_KEY": "x",
           "KERNELSAGE_CACHE": str(work / "cache")}
    (work / "order.txt").write_text("\n".join(TASKS) + "\n")
    figures: dict[str, list[float]] = {}
    placements: list[dict[str, list[str]]] = []
    if not options.skip_two_nodes:
        with standin_server(options.delay) as url, two_nodes(env) as (address, names):
            env["KERNELSAGE_MODEL_BASE_URL"] = url
            label = "compare --ray two-node cluster"
            for n in range(options.repeats):
                args = ["compare", "--policies", POLICIES, "--model", "openai:standin", "--order",
                        f"file:{work / 'order.txt'}", "--budget", str(options.budget), "--run-id", f"nodes-{n}",
                        "--namespace", f"nodes{n}", "--json", "--log-format", "json", "--ray", address]
                seconds, stderr = _run(args, env, work)
                figures.setdefault(label, []).append(seconds)
                placements.append(nodes_per_stream(stderr, names))
                print(f"{label}: {seconds:.1f} s, streams on {placements[-1]}", file=sys.stderr)
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_TMPDIR"):  # the other commands start their own
            env.pop(name, None)
    if not options.skip_compare:
        with standin_server(options.delay) as url:
            env["KERNELSAGE_MODEL_BASE_URL"] = url
            for n in range(options.repeats):
                for label, extra in (("compare sequential", []), ("compare --ray local", ["--ray", "local"])):
                    args = ["compare", "--policies", POLICIES, "--model", "openai:standin", "--order",
                            f"file:{work / 'order.txt'}", "--budget", str(options.budget), "--run-id",
                            f"{label.split()[1].strip('-')}-{n}", "--namespace", f"bench{n}", "--json", *extra]
                    figures.setdefault(label, []).append(_timed(args, env, work))
                    print(f"{label}: {figures[label][-1]:.1f} s", file=sys.stderr)
    if not options.skip_simulate:
        study = ["simulate", "--policies", "sage,uniform,atu-only,none", "--orders", "mixed", "--seeds", "2",
                 "--episodes", str(options.episodes), "--no-report", "--json"]
        for _ in range(options.repeats):
            for label, extra in (("simulate sequential", []), *((f"simulate --ray local --ray-cpus {k}",
                                                                 ["--ray", "local", "--ray-cpus", str(k)])
                                                                for k in (1, 2, 4))):
                figures.setdefault(label, []).append(_timed([*study, *extra], env, work))
                print(f"{label}: {figures[label][-1]:.1f} s", file=sys.stderr)
    server.cleanup()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; stand-in delay {options.delay} s")
    for label, times in figures.items():
        print(f"{label:40s} {_spread(times)}")
    for n, placement in enumerate(placements):
        used = sorted({node for nodes in placement.values() for node in nodes})
        print(f"two-node run {n}: nodes per stream {json.dumps(placement)}; nodes used: {', '.join(used)}")
    for slow, fast in (("compare sequential", "compare --ray local"),
                       ("compare sequential", "compare --ray two-node cluster"),
                       *(("simulate sequential", f"simulate --ray local --ray-cpus {k}") for k in (1, 2, 4))):
        if slow in figures and fast in figures:
            print(f"ratio {slow} / {fast}: {statistics.median(figures[slow]) / statistics.median(figures[fast]):.2f}x")
    print(json.dumps({k: v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
