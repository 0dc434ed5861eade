"""`kernelsage memory mine`: cold-start experience from known-good kernels (kernelsage.mining)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import typer

from kernelsage.cli.common import (
    DatabaseOption,
    JsonOption,
    console,
    err_console,
    new_table,
    open_store,
    print_json,
    say,
)
from kernelsage.cli.preflight import check_model_spec, check_writable
from kernelsage.errors import ConfigurationError

MINED_NAMESPACE = "mined"


def mine(
    backend: str = typer.Option("cpu", "--backend", "-b", help="The backend that judges the variants."),
    from_dir: Path | None = typer.Option(None, "--from", help="A folder of known-good kernels, one per task id "
                                         "(cpu: <task id>.cpp). Default: the backend's reference kernels."),
    suite_dir: Path | None = typer.Option(None, "--suite", help="A suite whose reference answers to mine (the "
                                          "backend's files in an answer/ folder beside each task)."),
    task_suite: str = typer.Option("builtin", "--task-suite", help="Where the tasks of --from's kernels are."),
    namespace: str = typer.Option(MINED_NAMESPACE, "--namespace", "-n", help="The namespace the lessons go to "
                                  "(created with the backend's knowledge pack; start runs from it with "
                                  "`compare -n NAME`)."),
    knowledge: bool = typer.Option(True, "--knowledge/--no-knowledge",
                                   help="Seed a new namespace with the backend's knowledge pack first."),
    model: str = typer.Option(..., "--model", "-m", envvar="KERNELSAGE_MODEL", help="provider:model, as for `run`."),
    run_id: str | None = typer.Option(None, help="Name of the mining run; the same id resumes it."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Where the ledger goes (default: runs/<run id>)."),
    budget: int | None = typer.Option(None, min=1, help="Evaluations this invocation may run (a variant costs 2: "
                                      "its own, and the original profiled beside it)."),
    variants: int = typer.Option(4, min=1, max=20, help="Variants asked for per kernel."),
    reps: int | None = typer.Option(None, min=5, help="Timed calls per profile (default: the backend's)."),
    db: str | None = DatabaseOption,
    as_json: bool = JsonOption,
) -> None:
    """Mine cold experience from known-good kernels: the model removes one named optimization per variant, the
    real evaluator judges each; removals that keep the kernel correct and make it measurably slower are stored
    as experiences with provenance "mined". One line per event on stderr; a table (or --json) at the end."""
    if from_dir is not None and suite_dir is not None:
        raise ConfigurationError("--from and --suite both name the kernels: give one of them")
    check_model_spec(model)
    run_id = run_id or dt.datetime.now().strftime("mine-%Y%m%d-%H%M%S")
    run_dir = run_dir or Path("runs") / run_id
    check_writable(run_dir)
    from kernelsage.knowledge import has_builtin_pack, pack_items
    from kernelsage.memory_backend.embeddings import make_embeddings
    from kernelsage.mining.ledger import LEDGER_NAME, Ledger
    from kernelsage.mining.run import Miner
    from kernelsage.models.spec import model_from_spec
    from kernelsage.tools.backend import get_backend

    chat_model = model_from_spec(model)
    judge = get_backend(backend, **({"reps": reps} if reps is not None else {}))
    try:
        kernels, tasks = _kernels_and_tasks(judge, backend, from_dir, suite_dir, task_suite)
        run_dir.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(run_dir / LEDGER_NAME, backend=backend, namespace=namespace)
        seed = (lambda: pack_items(backend=backend)) if knowledge and has_builtin_pack(backend) else None
        with open_store(db) as store:
            memory = store.open(namespace, embeddings=make_embeddings(), seed=seed)
            miner = Miner(backend=judge, model=chat_model, memory=memory, ledger=ledger, budget=budget,
                          variants=variants, on_event=lambda line: say(line, to=err_console))
            report = miner.mine(kernels, tasks)
    finally:
        judge.close()
    if as_json:
        print_json({"run_id": run_id, "namespace": namespace, "ledger": str(ledger.path), **report.to_dict()})
        return
    console.print(_report_table(report, run_id))
    lessons = sum(len(k.kept) for k in report.kernels)
    say(f"{lessons} lessons in {namespace!r} ({report.evaluations} evaluations this time"
        + (", budget spent: rerun with the same --run-id to go on" if report.out_of_budget else "") + ")")


def _kernels_and_tasks(judge: Any, backend: str, from_dir: Path | None, suite_dir: Path | None,
                       task_suite: str) -> tuple[list[Any], dict[str, Any]]:
    from kernelsage.mining.sources import backend_examples, from_folder, suite_answers
    from kernelsage.tasks.loaders import load_suite
    from kernelsage.tools.backend import files_to_write

    names = tuple(judge.candidate_files)

    if suite_dir is not None:
        tasks = load_suite(suite_dir).tasks
        kernels = suite_answers(tasks, lambda task: files_to_write(judge, task))
        if not kernels:
            raise ConfigurationError(f"--suite {suite_dir}: no task has reference answers for backend {backend!r} "
                                     "(the backend's files in an answer/ folder beside the task)")
        return kernels, {task.id: task for task in tasks}
    kernels = from_folder(from_dir, names) if from_dir is not None else backend_examples(backend, names)
    report = load_suite(task_suite, task_ids=[k.task_id for k in kernels])
    return kernels, {task.id: task for task in report.tasks}


def _report_table(report: Any, run_id: str) -> Any:
    table = new_table(f"mining run {run_id}: per kernel, what was proposed, judged and kept")
    for column in ("kernel", "proposed", "correct", "kept", "discarded"):
        table.add_column(column, no_wrap=True, justify="left" if column == "kernel" else "right")
    table.add_column("lessons (slower without it, ~95% interval) and discards (why)", ratio=1, min_width=24)
    for kernel in report.kernels:
        lines = [f"+ {v.optimization}: {v.judgement.gain}" for v in kernel.kept]
        lines += [f"- {v.optimization}: {v.judgement.reason}" for v in kernel.discarded]
        lines += [f"? {problem}" for problem in kernel.unread]
        if kernel.problem:
            lines.append(f"not mined: {kernel.problem}")
        table.add_row(kernel.task_id, str(kernel.proposed), str(kernel.correct), str(len(kernel.kept)),
                      str(len(kernel.discarded)), "\n".join(lines) or "-")
    return table
