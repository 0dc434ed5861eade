"""`kernelsage eval`: score a directory of ready kernels against a suite, no model needed."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from kernelsage.cli.common import JsonOption, console, print_json
from kernelsage.errors import ConfigurationError


def kernel_files(directory: Path, candidate_files: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Kernels by task id, in a tree that mirrors the ids (`level1/1_Scaled_Tanh.cpp` for the task
    `level1/1_Scaled_Tanh`): `<task_id>.<ext>` for one-file backends, or a `<task_id>/` folder of files."""
    if not directory.is_dir():
        raise ConfigurationError(f"{directory} is not a directory of kernels")
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
    as_json: bool = JsonOption,
) -> None:
    """Compile, verify and profile every kernel; print the metrics (ER, CR, speedups, fast_p)."""
    from kernelsage.evals.metrics import summarize
    from kernelsage.evals.records import EpisodeRecord
    from kernelsage.graph.records import Attempt, EpisodeOutcome
    from kernelsage.tasks.loaders import find_task, load_suite
    from kernelsage.tools.backend import get_backend
    from kernelsage.tools.evaluator import evaluate_candidate
    from kernelsage.tools.results import content_hash

    report = load_suite(suite, suite_format)
    records: list[EpisodeRecord] = []
    with get_backend(backend_name) as backend:
        for position, (task_id, files) in enumerate(kernel_files(kernels, backend.candidate_files).items()):
            task = find_task(report, task_id)
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
    if as_json:
        print_json({"kernels": [{"task_id": r.task_id, "solved": r.solved, "speedup": r.speedup,
                                 "status": r.attempts[0].status} for r in records], "summary": summary.to_dict()})
        return
    table = Table(title=f"{len(records)} kernels from {kernels}")
    for column in ("task", "level", "status", "speedup"):
        table.add_column(column)
    for r in records:
        table.add_row(r.task_id, str(r.level), r.attempts[0].status, f"{r.speedup:.2f}x" if r.speedup else "-")
    console.print(table)
    console.print(str(summary), highlight=False)
