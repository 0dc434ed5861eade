"""Scale-out on Ray, measured: wall time of a 3-policy compare against a STAND-IN model server that answers
after a fixed delay (bench/standin_model.py; not a model), sequential vs `--ray local`; and the simulator's
study (stochastic stand-in generator) sequential and with 1, 2 and 4 Ray CPUs. Each command runs as a user
runs it, in its own process, on a fresh embedded database. Figures, not assertions (docs/scale.md).

    .venv/bin/python bench/scale_bench.py --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from standin_model import standin_server

POLICIES = "sage,uniform,none"
TASKS = ("l1_relu", "l1_leaky_relu", "l1_sigmoid")


def _timed(args: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True, env=env,
                            cwd=cwd, stdin=subprocess.DEVNULL)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args[:2])} failed ({result.returncode}): {result.stderr[-2000:]}")
    return time.perf_counter() - start


def _spread(times: list[float]) -> str:
    return f"{statistics.median(times):.1f} s (min {min(times):.1f}, max {max(times):.1f}, n={len(times)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--delay", type=float, default=3.0, help="seconds the stand-in waits before each answer")
    parser.add_argument("--budget", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=60, help="episodes per simulated stream")
    parser.add_argument("--skip-compare", action="store_true")
    parser.add_argument("--skip-simulate", action="store_true")
    options = parser.parse_args()
    import pgserver

    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    server = pgserver.get_server(work / "db", cleanup_mode="delete")
    env = {**os.environ, "DATABASE_URL": server.get_uri(), "HF_HUB_OFFLINE": "1", "KERNELSAGE_MODEL_API_KEY": "x",
           "KERNELSAGE_CACHE": str(work / "cache")}
    (work / "order.txt").write_text("\n".join(TASKS) + "\n")
    figures: dict[str, list[float]] = {}
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
    for slow, fast in (("compare sequential", "compare --ray local"),
                       *(("simulate sequential", f"simulate --ray local --ray-cpus {k}") for k in (1, 2, 4))):
        if slow in figures and fast in figures:
            print(f"ratio {slow} / {fast}: {statistics.median(figures[slow]) / statistics.median(figures[fast]):.2f}x")
    print(json.dumps({k: v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
