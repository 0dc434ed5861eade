"""How long the light commands take to answer: each run in a fresh subprocess, as a user types it.

Not a test. For every command it prints the median wall time of --repeat runs (after one warm-up run that
fills the OS file cache and Python's bytecode cache), the spread (fastest and slowest run), the target
and the exit code, then the machine's load average: on a busy machine every figure grows, their ratio to
the targets much less. As its last line, one JSON object with the same figures.

Targets (2 free cores): --version and --help 0.5 s, `report` of the demo 2 s, `tasks list` 1 s,
`doctor --offline` 5 s. `report` needs a run directory (default runs/demo, written by `kernelsage demo`);
without one that row is skipped. `tasks list` is timed with its cache filled by the warm-up run (the first
listing after the tasks package changes loads the suite and torch: about 2 s on a quiet machine).
To compare with an earlier version: `git archive <commit> src | tar -x -C /tmp/old` and run this script with
PYTHONPATH=/tmp/old/src.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Latency:
    median: float
    fastest: float
    slowest: float
    exit_code: int


def time_command(argv: list[str], *, repeat: int, warmup: int = 1) -> Latency:
    """Median, fastest and slowest wall time of `argv` run `repeat` times in fresh processes, after `warmup`
    untimed runs; output is discarded, the last exit code kept."""
    samples, code = [], 0
    for run in range(warmup + repeat):
        started = time.perf_counter()
        code = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
        elapsed = time.perf_counter() - started
        if run >= warmup:
            samples.append(elapsed)
    return Latency(statistics.median(samples), min(samples), max(samples), code)


def commands(run_dir: Path) -> list[tuple[str, list[str], float]]:
    """(label, arguments, target seconds) of each command measured."""
    rows = [
        ("--version", ["--version"], 0.5),
        ("--help", ["--help"], 0.5),
        ("report --help", ["report", "--help"], 0.5),
        ("memory --help", ["memory", "--help"], 0.5),
        ("tasks list", ["tasks", "list"], 1.0),
        ("doctor --offline", ["doctor", "--offline"], 5.0),
    ]
    if (run_dir / "run.json").is_file() or any(run_dir.glob("*.jsonl")):
        rows.insert(4, (f"report {run_dir}", ["report", str(run_dir)], 2.0))
    else:
        print(f"no run in {run_dir}: `report` skipped (run `kernelsage demo` to write one)", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command (default 5)")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/demo"), help="the run `report` reports")
    parser.add_argument("--only", nargs="*", default=None, help="only the commands whose label starts so")
    args = parser.parse_args()

    results = {}
    load_before = os.getloadavg()
    print(f"{'command':<22} {'median':>8} {'spread':>15} {'target':>7}  verdict  exit")
    for label, argv, target in commands(args.run_dir):
        if args.only and not any(label.startswith(prefix) for prefix in args.only):
            continue
        latency = time_command([sys.executable, "-m", "kernelsage", *argv], repeat=args.repeat)
        verdict = "ok" if latency.median <= target else "SLOW"
        spread = f"{latency.fastest:.2f}-{latency.slowest:.2f}s"
        print(f"{label:<22} {latency.median:>7.2f}s {spread:>15} {target:>6.1f}s  {verdict:<7}  {latency.exit_code}",
              flush=True)
        results[label] = {"median_s": round(latency.median, 3), "fastest_s": round(latency.fastest, 3),
                          "slowest_s": round(latency.slowest, 3), "target_s": target, "exit_code": latency.exit_code}
    load_after = os.getloadavg()
    print(f"load average (1, 5, 15 min): before {', '.join(f'{v:.2f}' for v in load_before)}; "
          f"after {', '.join(f'{v:.2f}' for v in load_after)}; {os.cpu_count()} cores")
    print(json.dumps({"commands": results, "load_before": load_before, "load_after": load_after,
                      "repeat": args.repeat}))


if __name__ == "__main__":
    main()
