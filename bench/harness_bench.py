"""Benchmark of the cpu backend's harness: compile time, verify/profile overhead, timing stability.

Everything runs as in production: compiler, nm and the kernel runner isolated (bubblewrap, seccomp), the
judge checking every call. Not a test. Prints a table, then as its last line one JSON object:
  compile_median_s    median wall time of a fresh (uncached) compile of a small kernel: isolated compiler,
                      library read back, its links checked in a second sandbox, stored in the cache
  verify_overhead_s   median wall time of verifying a cheap kernel (all cases x 3 trials; kernel time is
                      negligible), runner start included
  profile_overhead_s  median wall time of a profile of l1_relu minus the time spent in the timed calls
                      themselves ((candidate mean + reference mean) x (warm-ups + reps))
  fresh_inputs_s      of that, what giving every call new contents costs at least: the element-wise blend of
                      two input sets into the shared inputs, timed here on l1_relu's perf inputs x calls
  profile_cv          coefficient of variation of the mean latency of one kernel profiled 10 times
                      (profile_cv_median, _min: of its median and of its fastest call)
  machine_cv          the same figure for the reference op (torch's exact GELU) timed in a plain loop in this
                      process, 10 rounds of as many calls, no harness: the noise floor of this machine
  double_work_ratio   mean latency of a kernel doing its work twice / the same kernel doing it once (~2);
                      double_work_ratio_min: of their fastest calls, which noise between profiles moves least
  isolation, input_sets, round_trip_us: the isolation level, the input sets l1_relu's profile rotated over,
                      the judge's calibrated round trip of an empty request to the runner
Targets: compile <= 0.5 s, overheads <= 0.3 s, CV <= 3 %, ratio within 10 % of 2.
With --breakdown it then prints where l1_relu's profile spends its time, step by step, in this process
(bench/profile_breakdown.py), and the same for a task whose contents repeat (l1_argmax_lastdim).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.results import Candidate
from profile_breakdown import breakdown, print_breakdown

EXAMPLES = Path(__file__).resolve().parents[1] / "src" / "kernelsage" / "tools" / "cpu" / "examples"

# Exact GELU, `passes` times over the same output: compute-bound (erf), so twice the passes is twice the work.
GELU_PASSES = """
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    for (int pass = 0; pass < PASSES; ++pass) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678f));
    }
    return 0;
}
"""


def _fresh_inputs_cost(task, calls: int) -> float:
    """Seconds the judge spends at least on fresh contents over `calls` calls: per call, each floating input
    blended element by element from two sets, through a window of random weights at a new offset, into the
    place the kernel reads (as tools/cpu/contents.py does)."""
    a, b = (list(task.instantiate(task.perf_case, seed).inputs.values()) for seed in (1, 2))
    shared = [torch.empty_like(t) for t in a]
    weights = torch.rand(max(t.numel() for t in a) + calls) * 0.5 + 0.25
    started = time.perf_counter()
    for call in range(calls):
        for x, y, view in zip(a, b, shared, strict=True):
            if x.is_floating_point():
                torch.lerp(x, y, weights[call:call + x.numel()].view(x.shape), out=view)
    return time.perf_counter() - started


def _machine_cv(task, rounds: int, calls: int) -> float:
    """CV of the mean of `calls` timed calls of the task's reference, over `rounds` rounds, in a plain loop."""
    instance = task.instantiate(task.perf_case, 0)
    means = []
    for _ in range(rounds):
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            instance.reference()
            samples.append(time.perf_counter() - started)
        means.append(statistics.fmean(samples))
    return _cv(means)


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="runs per overhead figure (median reported)")
    parser.add_argument("--profiles", type=int, default=10, help="profiles of one kernel for the CV")
    parser.add_argument("--breakdown", action="store_true", help="also time each step of a profile")
    args = parser.parse_args()

    suite = load_suite("builtin")
    relu, gelu = find_task(suite, "l1_relu"), find_task(suite, "l1_gelu")
    relu_source = (EXAMPLES / "l1_relu.cpp").read_text()
    with tempfile.TemporaryDirectory() as cache, CpuBackend(cache_dir=cache) as backend:
        warm = backend.compile(Candidate(task_id=relu.id, files={"kernel.cpp": relu_source}))
        backend.verify(warm.artifact, relu)  # starts the worker, loads the task

        compile_s = []
        for variant in range(args.repeats):
            started = time.perf_counter()
            result = backend.compile(Candidate(task_id=relu.id, files={
                "kernel.cpp": f"// variant {variant} {time.time_ns()}\n{relu_source}"}))
            compile_s.append(time.perf_counter() - started)
            assert result.ok and not result.cached, result.log

        verify_s = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            verified = backend.verify(warm.artifact, relu)
            verify_s.append(time.perf_counter() - started)
            assert verified.correct, verified.message

        profile_overhead, round_trips = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            profiled = backend.profile(warm.artifact, relu)
            wall = time.perf_counter() - started
            calls = profiled.candidate.warmup + profiled.candidate.reps
            timed = (profiled.candidate.mean + profiled.reference.mean) * calls
            profile_overhead.append(wall - timed)
            round_trips.append(profiled.round_trip_s)

        single = backend.compile(Candidate(task_id=gelu.id, files={"kernel.cpp": "#define PASSES 1\n" + GELU_PASSES}))
        double = backend.compile(Candidate(task_id=gelu.id, files={"kernel.cpp": "#define PASSES 2\n" + GELU_PASSES}))
        assert single.ok and double.ok, single.log + double.log
        once = [backend.profile(single.artifact, gelu) for _ in range(args.profiles)]
        twice = [backend.profile(double.artifact, gelu) for _ in range(3)]
        means_once = [p.candidate.mean for p in once]
        means_twice = [p.candidate.mean for p in twice]

    figures = {
        "compile_median_s": statistics.median(compile_s),
        "verify_overhead_s": statistics.median(verify_s),
        "profile_overhead_s": statistics.median(profile_overhead),
        "fresh_inputs_s": _fresh_inputs_cost(relu, profiled.candidate.warmup + profiled.candidate.reps)
        if profiled.fresh_inputs else 0.0,
        "profile_cv": _cv(means_once),
        "profile_cv_median": _cv([p.candidate.median for p in once]),
        "profile_cv_min": _cv([p.candidate.minimum for p in once]),
        "machine_cv": _machine_cv(gelu, args.profiles, once[0].candidate.warmup + once[0].candidate.reps),
        "double_work_ratio": statistics.median(means_twice) / statistics.median(means_once),
        "double_work_ratio_min": min(p.candidate.minimum for p in twice) / min(p.candidate.minimum for p in once),
        "gelu_once_ms": statistics.median(means_once) * 1e3,
        "gelu_reference_ms": statistics.median(p.reference.mean for p in once) * 1e3,
        "threads": backend.threads,
        "isolation": backend.isolation.level,
        "input_sets": profiled.input_sets,
        "round_trip_us": statistics.median(round_trips) * 1e6,
    }
    targets = {"compile_median_s": "<= 0.5", "verify_overhead_s": "<= 0.3", "profile_overhead_s": "<= 0.3",
               "profile_cv": "<= 0.03", "double_work_ratio": "1.8 .. 2.2"}
    table = Table(title="cpu backend harness")
    for column in ("figure", "value", "target"):
        table.add_column(column)
    for name, value in figures.items():
        table.add_row(name, f"{value:.4f}" if isinstance(value, float) else str(value), targets.get(name, ""))
    Console().print(table)
    if args.breakdown:
        _print_breakdowns(relu, relu_source, find_task(suite, "l1_argmax_lastdim"))
    print(json.dumps(figures, sort_keys=True))


ARGMAX = """
#include "kernelsage_cpu.h"
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int, ks_tensor* outputs, int, const ks_attr*, int) {
    const float* x = (const float*)inputs[0].data;
    int64_t* y = (int64_t*)outputs[0].data;
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1], rows = ks_numel(&inputs[0]) / n;
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j) if (x[r * n + j] > x[r * n + best]) best = j;
        y[r] = best;
    }
    return 0;
}
"""


def _print_breakdowns(relu, relu_source: str, argmax) -> None:
    with tempfile.TemporaryDirectory() as cache, CpuBackend(cache_dir=cache) as backend:
        for task, source in ((relu, relu_source), (argmax, ARGMAX)):
            steps, last = breakdown(backend, task, {"kernel.cpp": source}, 3)
            print_breakdown(task.id, steps, last)


if __name__ == "__main__":
    main()
