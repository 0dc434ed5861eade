"""`kernelsage tune`: search a kernel's declared tunables (docs/tuning.md) by profiling in the loop."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import typer

from kernelsage.cli.candidate_source import check_source_exists, read_candidate
from kernelsage.cli.common import JsonOption, console, err_console, new_table, print_json, say
from kernelsage.cli.task_options import MemoryLimitOption, TimeLimitOption, backend_options
from kernelsage.cli.tasks import DeviceOption, FormatOption, SuiteOption
from kernelsage.errors import ConfigurationError
from kernelsage.tuning.params import DEFAULT_BUDGET


def tune(
    task_id: str = typer.Option(..., "--task", "-t", help="Task id (see `kernelsage tasks list`)."),
    source: Path = typer.Option(..., "--source", help="The kernel source file that declares tunables, or "
                                "the directory of a candidate of several files (op_host + op_kernel)."),
    suite: str = SuiteOption,
    format: str = FormatOption,
    backend_name: str = typer.Option("cpu", "--backend", "-b",
                                     help="Kernel backend (cpu, ascend; triton on its interpreter checks only)."),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", min=2,
                               help="Evaluations to spend: compiles plus profiles (a new configuration costs 2)."),
    reps: int | None = typer.Option(None, "--reps", min=5, help="Timed calls per profile (default: the backend's)."),
    device: str | None = DeviceOption,
    memory_limit: int | None = MemoryLimitOption,
    time_limit: float | None = TimeLimitOption,
    as_json: bool = JsonOption,
) -> None:
    """Try the configurations the kernel declares (each verified before it is timed beside the reference) and
    print them, and the winner against the default with its interval. A tie keeps the default."""
    from kernelsage.tasks.loaders import find_task, load_suite
    from kernelsage.tools import get_backend
    from kernelsage.tools.backend import files_to_write
    from kernelsage.tuning import tune as run_tuning

    check_source_exists(source)
    task = find_task(load_suite(suite, format, task_ids=[task_id]), task_id)
    options: dict[str, Any] = backend_options(memory_limit, time_limit)
    if reps is not None:
        options["reps"] = reps
    if device is not None:
        if backend_name != "triton":
            raise ConfigurationError(f"--device chooses a triton device; the {backend_name} backend has none")
        options["device"] = device
    with closing(get_backend(backend_name, **options)) as backend:
        files = read_candidate(source, files_to_write(backend, task), task_id=task.id, backend=backend_name)
        result = run_tuning(backend, task, files, budget=budget,
                            on_tried=lambda tried: say(f"tried {_values(tried.values)}: {tried.verdict}",
                                                       to=err_console))
    if as_json:
        print_json(result.to_dict())
    else:
        _print_human(result)


def _values(values: dict[str, int]) -> str:
    return " ".join(f"{name}={value}" for name, value in values.items())


def _speed(tried: Any) -> str:
    from kernelsage.evals.metrics import median_speedup, time_spread
    from kernelsage.evals.report import interval_words

    reference, candidate = time_spread(tried.reference), time_spread(tried.candidate)
    if reference is None or candidate is None:
        return "not timed" if tried.verdict == "correct" else tried.message or "-"
    return interval_words(median_speedup(reference, candidate), "PyTorch")


def _print_human(result: Any) -> None:
    table = new_table(f"{len(result.tried)} of {result.space_size} configurations of {result.task_id} "
                      f"({result.backend}; speed: PyTorch's median time / the configuration's, latest profile)")
    table.add_column("configuration", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("profiles", justify="right", no_wrap=True)
    table.add_column("against PyTorch (median, ~95% interval)", ratio=1)
    for tried in result.tried:
        mark = " (default)" if tried.is_default else " (winner)" if tried.values == result.winner else ""
        table.add_row(_values(tried.values) + mark, tried.verdict, str(tried.profiles), _speed(tried))
    console.print(table)
    say(f"winner: {_values(result.winner)}: {result.decision}")
    if result.gain is not None:
        median, low, high = result.gain
        say(f"best against the default: {median:.2f}x (interval {low:.2f}x to {high:.2f}x, each relative to the "
            "reference beside it)")
    say(f"evaluations: {result.evaluations} of a budget of {result.budget} ({result.compiles} compiles, "
        f"{result.profiles} profiles; every configuration once would take {2 * result.space_size})")
