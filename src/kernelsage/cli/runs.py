"""`kernelsage run`, `compare` and `report`: task streams under memory policies, and their reports."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer

from kernelsage.cli.common import JsonOption, console, print_json
from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend.params import DEFAULT_NAMESPACE

RunDirOption = typer.Option(None, "--run-dir", help="Where records and reports go (default: runs/<run id>).")
ParamOption = typer.Option(
    [], "--param", "-p", envvar="KERNELSAGE_PARAMS",
    help="A memory hyperparameter NAME=VALUE, repeatable (delta, beta, gamma, eta_min, K_ado, K_op, B, mu, T, "
         "pool_size, top_k, ef_search, value_alpha, value_lambda, value_epsilon); recorded with each episode.",
)


def _experiment(*, policies: list[str], model: str, suite: str, suite_format: str, order: str, seed: int,
                limit: int | None, backend: str, budget: int, namespace: str, run_id: str | None,
                run_dir: Path | None, frozen_memory: Path | None, top_k: int | None, params: list[str]):
    from kernelsage.evals.experiment import Experiment
    from kernelsage.memory_backend.params import parse_overrides

    overrides = parse_overrides([p for text in params for p in text.replace(",", " ").split()])
    if "rounds" in overrides:  # T is the budget
        if budget not in (30, overrides["rounds"]):
            raise ConfigurationError(f"--budget {budget} and --param T={overrides['rounds']} disagree: give one")
        budget = overrides["rounds"]
    run_id = run_id or dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Experiment(run_id=run_id, run_dir=run_dir or Path("runs") / run_id, model=model, policies=policies,
                      namespace=namespace, suite=suite, suite_format=suite_format, order=order, seed=seed,
                      limit=limit, backend=backend, budget=budget, top_k=top_k, frozen_memory=frozen_memory,
                      params=overrides)


def _finish(experiment, results, as_json: bool) -> None:
    from kernelsage.evals.metrics import summarize
    from kernelsage.evals.report import write_report

    by_policy = results
    paths = write_report(by_policy, experiment.run_dir / "report", title=f"kernelsage run {experiment.run_id}")
    summaries = {p: summarize(records).to_dict() for p, records in by_policy.items()}
    if as_json:
        print_json({"run_id": experiment.run_id, "run_dir": str(experiment.run_dir), "summary": summaries,
                    "report": str(paths.html)})
        return
    console.print(paths.markdown.read_text(encoding="utf-8"), markup=False, highlight=False)
    console.print(f"\nreport: {paths.html}\nrecords: {experiment.run_dir}/<policy>.jsonl")


def run(
    model: str = typer.Option(..., "--model", "-m", envvar="KERNELSAGE_MODEL",
                              help="provider:model (e.g. openai:gpt-4o-mini; set KERNELSAGE_MODEL_BASE_URL for "
                                   "OpenAI-compatible endpoints) or replay:<cassette.jsonl>."),
    policy: str = typer.Option("sage", help="Memory policy: sage, atu-only, uniform, random-ugc, value, static, none."),
    suite: str = typer.Option("builtin", help="builtin, or a directory in our suite, KernelBench or NPUKernelBench format."),
    suite_format: str = typer.Option("auto", "--format", help="auto, suite, kernelbench or npukernelbench."),
    order: str = typer.Option("curriculum", help="curriculum, mixed, level:N or file:PATH."),
    seed: int = typer.Option(0, help="Seed of the mixed order and of exploration."),
    limit: int | None = typer.Option(None, min=1, help="Only the first N tasks of the stream."),
    backend: str = typer.Option("cpu", help="Kernel backend."),
    budget: int = typer.Option(30, min=1, help="Candidates per episode (T)."),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "--namespace", "-n", help="Starting memory namespace."),
    run_id: str | None = typer.Option(None, help="Name of the run; the same id resumes an interrupted run."),
    run_dir: Path | None = RunDirOption,
    frozen_memory: Path | None = typer.Option(None, help="Transfer mode: an exported memory, read-only."),
    top_k: int | None = typer.Option(None, min=1, help="Cold items shown per round."),
    param: list[str] = ParamOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a task stream: one episode per operator, the memory learning as it goes."""
    from kernelsage.evals.experiment import run_experiment

    experiment = _experiment(policies=[policy], model=model, suite=suite, suite_format=suite_format, order=order,
                             seed=seed, limit=limit, backend=backend, budget=budget, namespace=namespace,
                             run_id=run_id, run_dir=run_dir, frozen_memory=frozen_memory, top_k=top_k,
                             params=param)
    _finish(experiment, run_experiment(experiment), as_json)


def compare(
    policies: str = typer.Option("sage,uniform,atu-only,static,none", help="Comma-separated memory policies."),
    model: str = typer.Option(..., "--model", "-m", envvar="KERNELSAGE_MODEL", help="As for `run`."),
    suite: str = typer.Option("builtin"),
    suite_format: str = typer.Option("auto", "--format"),
    order: str = typer.Option("curriculum"),
    seed: int = typer.Option(0),
    limit: int | None = typer.Option(None, min=1),
    backend: str = typer.Option("cpu"),
    budget: int = typer.Option(30, min=1),
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "--namespace", "-n",
                                  help="Starting memory: every policy starts from an identical copy."),
    run_id: str | None = typer.Option(None),
    run_dir: Path | None = RunDirOption,
    frozen_memory: Path | None = typer.Option(None, help="Transfer mode for every policy (read-only)."),
    top_k: int | None = typer.Option(None, min=1),
    param: list[str] = ParamOption,
    as_json: bool = JsonOption,
) -> None:
    """Run several memory policies on the same stream, model, backend and budget; one table."""
    from kernelsage.evals.experiment import run_experiment

    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    if len(chosen) < 1:
        raise ConfigurationError("--policies needs at least one policy")
    experiment = _experiment(policies=chosen, model=model, suite=suite, suite_format=suite_format, order=order,
                             seed=seed, limit=limit, backend=backend, budget=budget, namespace=namespace,
                             run_id=run_id, run_dir=run_dir, frozen_memory=frozen_memory, top_k=top_k,
                             params=param)
    _finish(experiment, run_experiment(experiment), as_json)


def report(
    run_dir: Path = typer.Argument(..., help="A run directory with <policy>.jsonl record files."),
    as_json: bool = JsonOption,
) -> None:
    """Write the Markdown and HTML reports of a finished (or interrupted) run."""
    from kernelsage.evals.metrics import summarize
    from kernelsage.evals.records import read_records
    from kernelsage.evals.report import write_report

    files = sorted(run_dir.glob("*.jsonl"))
    if not files:
        raise ConfigurationError(f"{run_dir}: no <policy>.jsonl record files")
    by_policy = {f.stem: read_records(f) for f in files}
    paths = write_report(by_policy, run_dir / "report", title=f"kernelsage run {run_dir.name}")
    if as_json:
        print_json({"report": str(paths.html), "markdown": str(paths.markdown),
                    "summary": {p: summarize(r).to_dict() for p, r in by_policy.items()}})
    else:
        console.print(f"report: {paths.html}\nmarkdown: {paths.markdown}")
