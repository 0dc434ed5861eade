"""Where a cpu profile's time goes: the judge's profile run in this process, each step's exclusive wall time.

Used by bench/harness_bench.py (`--breakdown`); also runnable alone:
    .venv/bin/python bench/profile_breakdown.py [--task l1_relu] [--repeats 3]
Each step is timed by wrapping the function that does it (stack-aware: a step's time excludes the steps it
calls). "candidate calls" is the runner's request to its freeze (the kernel's own time plus the calibrated
round trip); "reference calls" includes the reference runs made while setting up. What is left over is the
loop's own Python work.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.cpu import judge, profile, runner
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.judging import contents
from kernelsage.tools.results import Candidate

EXAMPLES = Path(__file__).resolve().parents[1] / "src" / "kernelsage" / "tools" / "cpu" / "examples"

# step name -> (owner, attribute) pairs that do it; module-level functions are patched where profile.py and
# contents.py look them up
STEPS: dict[str, list[tuple[object, str]]] = {
    "runner start (sandbox, calibration)": [(judge.Judge, "start")],
    "runner stop": [(judge.Judge, "stop")],
    "sets to the runner": [(profile, "define_sets")],
    "inputs made (sets, unseen)": [(profile, "instantiate")],
    "reference calls": [(profile, "run_reference"), (contents, "run_reference")],
    "structure checks and weights": [(contents.FreshContents, "build")],
    "blend": [(contents.FreshContents, "blend")],
    "inputs written": [(judge.Judge, "write_inputs")],
    "poison": [(profile._Timed, "poison")],
    "output checks": [(profile._Timed, "check")],
    "input checks": [(profile._Timed, "check_inputs")],
    "candidate calls": [(runner.Runner, "run"), (runner.Runner, "freeze")],
    "thaw and settle": [(runner.Runner, "thaw"), (runner.Runner, "settled")],
    "unseen instances placed": [(profile._Timed, "unseen_instance")],
    "plans": [(profile, "plan")],
}


class Stopwatch:
    """Exclusive wall time per step: a step's time minus the steps it calls."""

    def __init__(self) -> None:
        self.exclusive: dict[str, float] = defaultdict(float)
        self.stack: list[list[float]] = []

    def wrap(self, step: str, function: Callable) -> Callable:
        @functools.wraps(function)
        def timed(*args, **kwargs):
            self.stack.append([0.0])
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                children = self.stack.pop()[0]
                self.exclusive[step] += elapsed - children
                if self.stack:
                    self.stack[-1][0] += elapsed
        return timed


@contextlib.contextmanager
def instrumented(watch: Stopwatch) -> Iterator[None]:
    saved = []
    for step, places in STEPS.items():
        for owner, name in places:
            original = getattr(owner, name)
            saved.append((owner, name, original))
            setattr(owner, name, watch.wrap(step, original))
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def breakdown(backend: CpuBackend, task, files: dict[str, str], repeats: int) -> tuple[dict[str, float], dict]:
    """Median seconds per step over `repeats` in-process profiles, and what the last one reported."""
    compiled = backend.compile(Candidate(task_id=task.id, files=files))
    assert compiled.ok, compiled.log
    runs, last = [], {}
    for seed in range(repeats):
        payload = {**backend._job_payload(compiled.artifact, task), "seed": 1000 + seed, "sets": backend.profile_sets,
                   "warmup": backend.warmup, "reps": backend.reps}
        events: list[dict] = []
        watch = Stopwatch()
        with tempfile.TemporaryDirectory() as workdir, contextlib.chdir(workdir), instrumented(watch):
            started = time.perf_counter()
            profile.profile(payload, task, events.append)
            wall = time.perf_counter() - started
        last = next(e["data"] for e in events if e.get("kind") == "result")
        assert last["status"] == "ok", last
        steps = dict(watch.exclusive)
        steps["loop and rest"] = wall - sum(steps.values())
        steps["total"] = wall
        calls = last["candidate"]["warmup"] + last["candidate"]["reps"]
        steps["overhead (total - timed calls' own time)"] = wall - calls * (
            last["candidate"]["mean"] + last["reference"]["mean"])
        runs.append(steps)
    return {step: statistics.median(run.get(step, 0.0) for run in runs) for step in runs[0]}, last


def print_breakdown(title: str, steps: dict[str, float], last: dict[str, object]) -> None:
    table = Table(title=f"{title}: contents {last.get('contents')}, {last.get('input_sets')} sets, "
                        f"{last.get('unseen_calls')} unseen calls")
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for step, seconds in sorted(steps.items(), key=lambda item: -item[1]):
        table.add_row(step, f"{seconds:.3f}")
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="l1_relu")
    parser.add_argument("--kernel", default=None, help="kernel source (default: the task's example, else l1_relu's)")
    parser.add_argument("--header", action="append", default=[], help="a file the kernel includes (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    task = find_task(load_suite("builtin"), args.task)
    example = EXAMPLES / f"{args.task}.cpp"
    files = {"kernel.cpp": Path(args.kernel).read_text() if args.kernel else example.read_text(),
             **{Path(header).name: Path(header).read_text() for header in args.header}}
    with tempfile.TemporaryDirectory() as cache, CpuBackend(cache_dir=cache) as backend:
        steps, last = breakdown(backend, task, files, args.repeats)
    print_breakdown(args.task, steps, last)


if __name__ == "__main__":
    main()
