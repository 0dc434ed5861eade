"""`kernelsage eval`: score a directory of ready kernels against a suite, no model needed."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import typer

from kernelsage.cli.common import EXIT_FAILED, JsonOption, console, err_console, new_table, print_json, say
from kernelsage.cli.invocation import program
from kernelsage.cli.task_options import (
    MemoryLimitOption,
    ShapeBudgetOption,
    TimeLimitOption,
    ToleranceOption,
    backend_options,
)
from kernelsage.errors import ConfigurationError


def kernel_files(directory: Path, candidate_files: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Kernels by task id, in a tree that mirrors the ids (`level1/1_Scaled_Tanh.cpp` for the task
    `level1/1_Scaled_Tanh`): `<task_id>.<ext>` for one-file backends, or a `<task_id>/` folder of files."""
    if not directory.is_dir():
        what = "it is a file" if directory.is_file() else "it does not exist"
        raise ConfigurationError(f"{directory} is not a directory ({what}): give a directory of kernels named by "
                                 f"task id (to check one kernel file: `{program()} check --task ID --source FILE`)")
    found: dict[str, dict[str, str]] = {}
    suffix = Path(candidate_files[0]).suffix
    for path in sorted(directory.rglob("*")):
        task_id = path.relative_to(directory).with_suffix("").as_posix()
        if path.is_dir() and all((path / name).is_file() for name in candidate_files):
            found[path.relative_to(directory).as_posix()] = {
                name: (path / name).read_text(encoding="utf-8") for name in candidate_files}
        elif path.is_file() and path.suffix == suffix and len(candidate_files) == 1:
            found[task_id] = {candidate_files[0]: path.read_text(encoding="utf-8")}
    if not found:
        raise ConfigurationError(f"{directory}: no kernels (expected <task_id>{suffix} files or <task_id>/ folders, "
                                 "in folders that mirror ids such as level1/<name>)")
    return found


def evaluate(
    kernels: Path = typer.Argument(..., help="Directory of kernels named by task id."),
    suite: str = typer.Option("builtin", help="The suite the task ids come from."),
    suite_format: str = typer.Option("auto", "--format"),
    backend_name: str = typer.Option("cpu", "--backend"),
    output: Path | None = typer.Option(None, "--output", "-o", help="Also write the records to this JSONL file."),
    shape_budget: str | None = ShapeBudgetOption,
    tolerance: str | None = ToleranceOption,
    memory_limit: int | None = MemoryLimitOption,
    time_limit: float | None = TimeLimitOption,
    as_json: bool = JsonOption,
) -> None:
    """Compile, verify and profile every kernel; print the metrics (ER, CR, speedups, fast_p). Exit code 1
    when a kernel is not correct (as `check` for one kernel), after printing everything."""
    from kernelsage.cli.candidate_source import named_for_task
    from kernelsage.evals.metrics import summarize
    from kernelsage.evals.records import EpisodeRecord
    from kernelsage.graph.records import Attempt, EpisodeOutcome
    from kernelsage.tasks.loaders import find_task, load_suite
    from kernelsage.tools.backend import files_to_write, get_backend
    from kernelsage.tools.evaluator import evaluate_candidate
    from kernelsage.tools.results import content_hash

    records: list[EpisodeRecord] = []
    with closing(get_backend(backend_name, **backend_options(memory_limit, time_limit))) as backend:
        found = kernel_files(kernels, backend.candidate_files)
        # Only the tasks with a kernel are loaded and scaled: scaling a whole suite takes minutes.
        report = load_suite(suite, suite_format, shape_budget=shape_budget, tolerance=tolerance, task_ids=found)
        for position, (task_id, files) in enumerate(found.items()):
            task = find_task(report, task_id)
            files = named_for_task(files, files_to_write(backend, task))
            evaluation = evaluate_candidate(backend, task, files)
            attempt = Attempt(round=1, stage="draft", status=evaluation.status.value, candidate_hash=content_hash(files),
                              files=files, evaluation=evaluation)
            outcome = EpisodeOutcome.of(task_id=task.id, episode_id=f"eval:{task.id}", level=task.level, rounds=1,
                                        attempts=[attempt])
            records.append(EpisodeRecord(
                **dict(outcome), run_id=f"eval:{kernels.name}", policy="ready-kernels", model="none",
                backend=backend.name, namespace="", position=position, category=task.category, attempts=[attempt]))
    if output is not None:
        output.write_text("".join(r.model_dump_json() + "\n" for r in records), encoding="utf-8")
    summary = summarize(records)
    speedups = {r.task_id: _median_speedup(r) for r in records}
    if as_json:
        print_json({"kernels": [{"task_id": r.task_id, "level": r.level, "solved": r.solved,
                                 "status": r.attempts[0].status, "speedup": r.speedup,
                                 "speedup_median": speedups[r.task_id].to_dict() if speedups[r.task_id] else None}
                                for r in records],
                    "speedup_median": _overall(speedups).to_dict(), "summary": summary.to_dict()})
    else:
        _print_human(kernels, records, speedups, summary)
    failed = [r.task_id for r in records if not r.solved]
    if failed:
        shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        say(f"error: {len(failed)} of {len(records)} kernels are not correct ({shown})", to=err_console)
        raise typer.Exit(EXIT_FAILED)


def _median_speedup(record: Any) -> Any:
    """T_reference / T_kernel from the medians of the two timings, with the interval the medians' intervals
    allow; None when the kernel was not correct or not timed."""
    from kernelsage.evals.metrics import median_speedup, time_spread

    profile = record.attempts[0].evaluation.profile if record.attempts[0].evaluation else None
    if not record.solved or profile is None:
        return None
    reference, candidate = time_spread(profile.reference), time_spread(profile.candidate)
    return median_speedup(reference, candidate) if reference and candidate else None


def _overall(speedups: dict[str, Any]) -> Any:
    from kernelsage.evals.metrics import ratio_median

    return ratio_median([s.median for s in speedups.values() if s is not None])


def _print_human(kernels: Path, records: list[Any], speedups: dict[str, Any], summary: Any) -> None:
    """One row per kernel, then the metrics in words."""
    from kernelsage.evals.report import format_seconds, interval_words, speedup_words

    table = new_table(f"{len(records)} kernels from {kernels} (speedup: PyTorch's median time / the kernel's)")
    table.add_column("task", no_wrap=True)
    table.add_column("level", no_wrap=True, justify="right")
    table.add_column("status", no_wrap=True)
    table.add_column("kernel time", no_wrap=True, justify="right")
    table.add_column("against PyTorch (median, ~95% interval)", ratio=1)
    for r in records:
        speedup = speedups[r.task_id]
        profile = r.attempts[0].evaluation.profile if r.attempts[0].evaluation else None
        median = profile.candidate.median if profile and profile.candidate and r.solved else None
        table.add_row(r.task_id, "-" if r.level is None else str(r.level), r.attempts[0].status,
                      format_seconds(median) if median else "-",
                      interval_words(speedup, "PyTorch") if speedup else
                      "not timed (the interpreter checks correctness only)" if r.solved else "not timed (not correct)")
    console.print(table)
    overall = summary.overall
    median = _overall(speedups)
    say(f"correct (ER, execution rate): {overall.er.n} of {overall.er.total} kernels; compiled (CR): "
        f"{overall.cr.n} of {overall.cr.total}")
    if overall.fast1.total:
        say(f"faster than PyTorch beyond the measured noise (Fast1.0): {overall.fast1.n} of {overall.fast1.total} "
            "correct kernels")
    else:  # "0 of 0" reads as a result
        say("faster than PyTorch (Fast1.0): no correct kernel to time")
    if median.value is not None:
        spread = f", from {median.low:.2f}x to {median.high:.2f}x" if median.n > 1 else ""
        say(f"median over correct kernels: {speedup_words(median.value, 'PyTorch')} (n={median.n}{spread})")
