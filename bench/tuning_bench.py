"""Benchmark of `kernelsage tune` on the cpu reference kernels with tunables (tools/cpu/examples/tunable/*.cpp).

Per kernel: an exhaustive grid (every configuration compiled, verified and profiled once: 2 evaluations each,
a compile and a profile), then the tuner with a budget of --fraction of the grid's evaluations, then the tuned
winner, the best it found, the grid's best and the default profiled again side by side, alternating,
--rounds times each (each distinct configuration once a round). Prints
one row per kernel, then as its last line one JSON object:
  tuned_vs_default     the tuner's own figure: the default's time over the best found's (each relative to the
                       reference beside it), median of its paired rounds with the interval (docs/tuning.md)
  winner_vs_grid_best  the winner's relative time over the grid best's, medians of the side-by-side rounds
                       (4x the timed calls; 1.0: the same; goal <= 1.05); best_found_vs_grid_best the same for
                       the fastest the tuner found (the winner unless a tie kept the default),
                       side_by_side_winner_vs_default for the default over the winner
  evaluations          compiles + profiles the tuner used, against the grid's
Not a test: the figures move with the machine's load (printed with them). Every configuration is built and run
isolated, exactly as the agent's kernels are.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tasks.model import Task
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Candidate, ProfileResult
from kernelsage.tuning import tune
from kernelsage.tuning.cpu_tunables import apply_cpu_config, cpu_space
from kernelsage.tuning.space import Config, describe

EXAMPLES = Path(__file__).resolve().parents[1] / "src" / "kernelsage" / "tools" / "cpu" / "examples"
KERNELS = ("l3_matmul", "l2_softmax", "l2_add_rms_norm")


def relative(profile: ProfileResult | None) -> float | None:
    """The candidate's median time over the reference's beside it; None when the profile did not time both."""
    if profile is None or not (profile.ok and profile.output_correct) or not (profile.candidate and profile.reference):
        return None
    return profile.candidate.median / profile.reference.median


def grid(backend: CpuBackend, task: Task, files: dict[str, str]) -> dict[Config, float]:
    """Every configuration once: its relative median time (correct ones only)."""
    found = {}
    for config in cpu_space(files).configs:
        evaluation = evaluate_candidate(backend, task, apply_cpu_config(files, config))
        time = relative(evaluation.profile) if evaluation.correct else None
        if time is not None:
            found[config] = time
    return found


def side_by_side(backend: CpuBackend, task: Task, files: dict[str, str], configs: dict[str, Config],
                 rounds: int, reps: int) -> dict[str, float]:
    """The median relative time of each named configuration over `rounds` alternating profiles of `reps` calls."""
    times: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, config in configs.items():
            built = backend.compile(Candidate(task_id=task.id, files=apply_cpu_config(files, config)))
            time = relative(backend.profile(built.artifact, task, reps=reps)) if built.artifact else None
            if time is not None:
                times[name].append(time)
    return {name: statistics.median(values) for name, values in times.items() if values}


def bench_kernel(backend: CpuBackend, name: str, fraction: float, rounds: int) -> dict[str, Any]:
    task = find_task(load_suite("builtin", task_ids=[name]), name)
    files = {"kernel.cpp": (EXAMPLES / "tunable" / f"{name}.cpp").read_text()}
    space = cpu_space(files)
    started = time.perf_counter()
    measured = grid(backend, task, files)
    grid_s = time.perf_counter() - started
    grid_best = min(measured, key=measured.__getitem__)
    budget = int(fraction * 2 * space.size)
    started = time.perf_counter()
    result = tune(backend, task, files, budget=budget)
    tune_s = time.perf_counter() - started
    named = {"winner": tuple(result.winner.items()), "best_found": tuple(result.best.items()),
             "grid_best": grid_best, "default": space.default}
    distinct = {config: name for name, config in reversed(named.items())}  # a configuration profiled once a round
    again = side_by_side(backend, task, files, {name: config for config, name in distinct.items()}, rounds,
                         4 * backend.reps)
    times = {name: again[distinct[config]] for name, config in named.items()}
    return {"task": name, "space": space.size, "grid_evaluations": 2 * space.size, "grid_s": round(grid_s, 1),
            "budget": budget, "evaluations": result.evaluations, "tune_s": round(tune_s, 1),
            "winner": describe(named["winner"]), "best_found": describe(named["best_found"]),
            "decision": result.decision, "grid_best": describe(grid_best),
            "tuned_vs_default": [round(v, 3) for v in result.gain] if result.gain else None,
            "grid_best_vs_default_in_grid": round(measured[space.default] / measured[grid_best], 3),
            "side_by_side_winner_vs_default": round(times["default"] / times["winner"], 3),
            "winner_vs_grid_best": round(times["winner"] / times["grid_best"], 3),
            "best_found_vs_grid_best": round(times["best_found"] / times["grid_best"], 3),
            "default_vs_grid_best": round(times["default"] / times["grid_best"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--fraction", type=float, default=0.3, help="the tuner's budget, a share of the grid's")
    parser.add_argument("--reps", type=int, default=20, help="timed calls per profile (the backend's default: 100)")
    parser.add_argument("--rounds", type=int, default=5, help="side-by-side profiles of winner, grid best, default")
    args = parser.parse_args()
    console = Console(width=160)  # the table keeps its columns whole in a log
    load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        backend = CpuBackend(cache_dir=cache, reps=args.reps, warmup=2)
        try:
            for name in args.kernels:
                rows.append(bench_kernel(backend, name, args.fraction, args.rounds))
                console.print(rows[-1], highlight=False)
        finally:
            backend.close()
    table = Table(title=f"tuning, cpu ({args.reps} reps per profile; load {load[0]:.1f} before, "
                        f"{os.getloadavg()[0]:.1f} after)")
    for column in ("task", "space", "evals used / grid", "winner", "best found vs default (tuner)",
                   "winner / grid best", "best found / grid best"):
        table.add_column(column)
    for row in rows:
        gain = row["tuned_vs_default"]
        table.add_row(str(row["task"]), str(row["space"]), f"{row['evaluations']} / {row['grid_evaluations']}",
                      str(row["winner"]), f"{gain[0]}x ({gain[1]}-{gain[2]})" if gain else "-",
                      str(row["winner_vs_grid_best"]), str(row["best_found_vs_grid_best"]))
    console.print(table)
    print(json.dumps({"load_before": load[0], "load_after": os.getloadavg()[0], "reps": args.reps, "kernels": rows}))


if __name__ == "__main__":
    main()
