"""`kernelsage run`, `compare` and `report`: task streams under memory policies, and their reports."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from kernelsage.cli.common import EXIT_FAILED, JsonOption, console, err_console, new_table, print_json, say
from kernelsage.cli.interrupt import interrupted_message, interruptible
from kernelsage.cli.invocation import program
from kernelsage.cli.preflight import (
    check_frozen_memory,
    check_model_spec,
    check_order,
    check_policies,
    check_suite,
    check_writable,
)
from kernelsage.cli.run_log import (
    LogFormatOption,
    check_log_format,
    episode_finished,
    event_lines,
    run_started,
)
from kernelsage.cli.scale_options import (
    EvalSlotsOption,
    MaxModelCallsOption,
    RayCpusOption,
    RayInsecureOption,
    RayOption,
    ScaleOptions,
)
from kernelsage.cli.task_options import (
    MemoryLimitOption,
    ShapeBudgetOption,
    TimeLimitOption,
    ToleranceOption,
    exported_settings,
)
from kernelsage.errors import CassetteMissError, ConfigurationError
from kernelsage.memory_backend.params import DEFAULT_NAMESPACE

NO_CODE = "no code was produced"
RunDirOption = typer.Option(None, "--run-dir", help="Where records and reports go (default: runs/<run id>).")
TuningBudgetOption = typer.Option(
    None, "--tuning-budget", min=0, envvar="KERNELSAGE_TUNING_BUDGET",
    help="Compiles plus profiles each episode may spend tuning the tunables (KS_TUNABLE, triton.Config) of its "
         "first correct kernel that declares them, charged one round per two; 0 (default): no tuning. "
         "See docs/tuning.md. Env: KERNELSAGE_TUNING_BUDGET.")
ParamOption = typer.Option(
    [], "--param", "-p", envvar="KERNELSAGE_PARAMS",
    help="A memory hyperparameter NAME=VALUE, repeatable (delta, beta, gamma, eta_min, K_ado, K_op, B, mu, T, "
         "pool_size, top_k, probes, retrieval, adoption, value_alpha, value_lambda, value_epsilon); recorded with "
         "each episode.",
)

AdoptionOption = typer.Option(
    None, "--adoption",
    help="What ATU credits as adopted: declared (the model's declarations, the method's default) or audited "
         "(only declarations the written code shows evidence of; `kernelsage memory audit` shows both). "
         "Same as --param adoption=...; recorded with each episode.",
)


def _stream_command(command: str, *, as_json: bool, run_id: str | None, run_dir: Path | None,
                    scale: ScaleOptions, log_format: str | None = None, **options: Any) -> None:
    """`run` and `compare`: check the arguments, run, write the records and the report, and end non-zero with
    one line when the model failed or no round produced code (after everything is written). Where no live
    board can be drawn, every event is a line on stderr (kernelsage.cli.run_log)."""
    run_id = run_id or dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = run_dir or Path("runs") / run_id
    check_log_format(log_format)
    target = scale.target()  # before anything heavy: a bad --ray or a missing extra is refused at once
    with interruptible(lambda: interrupted_message(run_dir, run_id, command)), \
            event_lines(log_format, terminal=err_console.is_terminal):
        experiment, chat_model = _experiment(run_id=run_id, run_dir=run_dir, **options)
        from kernelsage.graph.runner_events import emit

        emit(run_started(command=command, run_id=run_id, run_dir=str(run_dir), policies=experiment.policies,
                         model=experiment.model))
        results = _execute(experiment, chat_model, target, scale)
        problem = _finish(experiment, results, as_json)
    if problem:
        say(f"error: {problem}", to=err_console)
        raise typer.Exit(EXIT_FAILED)


def _experiment(*, policies: list[str], model: str, suite: str, suite_format: str, order: str, seed: int,
                limit: int | None, backend: str, budget: int, namespace: str, run_id: str,
                run_dir: Path, frozen_memory: Path | None, top_k: int | None, params: list[str],
                adoption: str | None = None, tuning_budget: int | None = None):
    """The experiment the options describe, and its chat model; every argument that can be checked without
    loading torch, the suite or the database is checked first, so a typo is refused in a second or two."""
    from kernelsage.memory_backend.params import parse_overrides

    check_model_spec(model)
    check_policies(policies)
    check_suite(suite)
    check_order(order)
    check_frozen_memory(frozen_memory)
    if tuning_budget is not None:
        from kernelsage.tuning.params import check_episode_budget

        check_episode_budget(tuning_budget)
    overrides = parse_overrides([p for text in params for p in text.replace(",", " ").split()])
    if adoption is not None:
        if overrides.get("adoption", adoption) != adoption:
            raise ConfigurationError(f"--adoption {adoption} and --param adoption={overrides['adoption']} disagree: "
                                     "give one")
        overrides.update(parse_overrides([f"adoption={adoption}"]))
    if "rounds" in overrides:  # T is the budget
        if budget not in (30, overrides["rounds"]):
            raise ConfigurationError(f"--budget {budget} and --param T={overrides['rounds']} disagree: give one")
        budget = overrides["rounds"]
    check_writable(run_dir)
    chat_model = _chat_model(model)
    # Torch and the graph load here, only once the arguments are known to be sound.
    from kernelsage.evals.experiment import Experiment

    experiment = Experiment(run_id=run_id, run_dir=run_dir, model=model, policies=policies, namespace=namespace,
                            suite=suite, suite_format=suite_format, order=order, seed=seed, limit=limit,
                            backend=backend, budget=budget, tuning_budget=tuning_budget, top_k=top_k,
                            frozen_memory=frozen_memory, params=overrides)
    return experiment, chat_model


def _chat_model(spec: str) -> Any:
    """The chat model a spec names, built before anything heavy loads: a malformed spec, an unknown provider,
    a missing key or recording, or a bad KERNELSAGE_MODEL_* value is refused at once."""
    from kernelsage.models.spec import model_from_spec

    return model_from_spec(spec)


def _execute(experiment: Any, chat_model: Any, target: Any = None,
             scale: ScaleOptions | None = None) -> dict[str, list[Any]]:
    """Run the experiment (its streams in parallel on Ray when a cluster is named); a stream the model stopped
    still hands back its records (run.json says why it stopped), and a replay that misses says what a
    recording replays."""
    from kernelsage.evals.experiment import ExperimentStopped, run_experiment
    from kernelsage.evals.stream import read_done
    from kernelsage.graph.runner_events import emit

    earlier = {p: set(read_done(experiment.records_path(p))) for p in experiment.policies}  # a resumed run's

    def finished(policy: str, record: Any) -> None:
        emit(episode_finished(policy, record, kept=record.episode_id in earlier[policy]))

    try:
        if target is not None and scale is not None:
            return _execute_on_ray(experiment, chat_model, target, scale)
        return run_experiment(experiment, model=chat_model, console=err_console, on_record=finished)
    except ExperimentStopped as stopped:
        return stopped.results
    except CassetteMissError as exc:
        if not experiment.model.startswith("replay:"):
            raise
        raise CassetteMissError(
            f"{exc}. A recording replays only the stream it was recorded on: the same operators in the same "
            "order, policy, --budget, --top-k and starting memory (the demo's recording: policy sage, --budget 3, "
            "--top-k 64, a fresh memory and the order in runs/demo/order.txt; `kernelsage demo` runs it)"
        ) from exc


def _execute_on_ray(experiment: Any, chat_model: Any, target: Any, scale: ScaleOptions) -> dict[str, list[Any]]:
    from kernelsage.scale.cluster import connected
    from kernelsage.scale.streams import run_on_ray

    with connected(target, say=lambda text: say(text, to=err_console)):
        return run_on_ray(experiment, chat_model=chat_model, console=err_console, eval_slots=scale.eval_slots,
                          max_model_calls=scale.max_model_calls)


def _summary_table(summaries: dict[str, Any]) -> Table:
    """One row per policy, every metric in words a reader need not look up."""
    from kernelsage.evals.report import speedup_words

    table = new_table("results (ER = execution rate: operators with a correct kernel)")
    table.add_column("policy", no_wrap=True)
    for column in ("solved (ER)", "compiled (CR)", "beat PyTorch", "median best kernel"):
        table.add_column(column, ratio=1 if column == "median best kernel" else None)
    for policy, summary in summaries.items():
        overall = summary.overall
        median = overall.speedup_median
        spread = f" (n={median.n}, {median.low:.2f}x to {median.high:.2f}x)" if median.n > 1 else ""
        # "0 of 0" reads as a result; with nothing to compile or to time, say what happened instead.
        compiled = f"{overall.cr.n} of {overall.cr.total}" if overall.cr.total else NO_CODE
        beat = (f"{overall.fast1.n} of {overall.fast1.total} solved" if overall.fast1.total
                else "none solved" if overall.cr.total else "-")
        table.add_row(policy, f"{overall.er.n} of {overall.er.total}", compiled, beat,
                      speedup_words(median.value) + spread)
    return table


def _operators_table(policy: str, records: list[Any]) -> Table:
    from kernelsage.evals.metrics import deduplicate
    from kernelsage.evals.report import speedup_words

    table = new_table(f"operators ({policy})")
    table.add_column("operator", no_wrap=True)
    table.add_column("rounds", ratio=1)
    table.add_column("best kernel", ratio=1)
    for record in deduplicate(records):
        rounds = ", ".join(a.status for a in record.attempts) or "-"
        table.add_row(record.task_id, rounds, speedup_words(record.speedup) if record.solved else "not solved")
    return table


def _finish(experiment, results, as_json: bool) -> str | None:
    """Write the report, print the results, and return the line the command must end with when the run did
    not do its job (the model failed, or no round produced code), else None."""
    from kernelsage.evals.metrics import summarize
    from kernelsage.evals.records import read_run_metadata
    from kernelsage.evals.report import write_report
    from kernelsage.evals.verdict import run_problem

    by_policy = results
    metadata = read_run_metadata(experiment.run_dir)
    paths = write_report(by_policy, experiment.run_dir / "report", title=f"kernelsage run {experiment.run_id}",
                         notes=metadata.report_notes() if metadata else (),
                         hot_rules=metadata.hot_rules if metadata else None)
    summaries = {p: summarize(records) for p, records in by_policy.items()}
    namespaces = {p: experiment.policy_namespace(p) for p in by_policy}
    model = metadata.model if metadata and metadata.model else experiment.model
    if metadata and metadata.endpoint:
        model += f" at {metadata.endpoint}"
    problem = run_problem(by_policy, model=model, stopped=metadata.stopped if metadata else None)
    if problem:
        problem += f"; records and report are in {experiment.run_dir}"
    if as_json:
        print_json({"run_id": experiment.run_id, "run_dir": str(experiment.run_dir),
                    "summary": {p: s.to_dict() for p, s in summaries.items()}, "namespaces": namespaces,
                    "report": str(paths.html.resolve()), "markdown": str(paths.markdown.resolve()),
                    "problem": problem})
        return problem
    for policy, records in by_policy.items():
        console.print(_operators_table(policy, records))
    console.print(_summary_table(summaries))
    if metadata and metadata.stopped:
        say(metadata.report_notes()[-1])
    say(f"report: {paths.html}\nrecords: {experiment.run_dir}/<policy>.jsonl")
    say(f"memory: learned in {', '.join(namespaces.values())}")
    say(f"inspect it: {program()} memory stats --run {experiment.run_id}"
        + (" --policy POLICY" if len(namespaces) > 1 else ""))
    return problem


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
    tuning_budget: int | None = TuningBudgetOption,
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "--namespace", "-n", help="Starting memory namespace."),
    run_id: str | None = typer.Option(None, help="Name of the run; the same id resumes an interrupted run."),
    run_dir: Path | None = RunDirOption,
    frozen_memory: Path | None = typer.Option(None, help="Transfer mode: an exported memory, read-only."),
    top_k: int | None = typer.Option(None, min=1, help="Cold items shown per round."),
    param: list[str] = ParamOption,
    adoption: str | None = AdoptionOption,
    shape_budget: str | None = ShapeBudgetOption,
    tolerance: str | None = ToleranceOption,
    memory_limit: int | None = MemoryLimitOption,
    time_limit: float | None = TimeLimitOption,
    ray: str | None = RayOption,
    ray_cpus: int | None = RayCpusOption,
    ray_insecure: bool = RayInsecureOption,
    eval_slots: int = EvalSlotsOption,
    max_model_calls: int | None = MaxModelCallsOption,
    log_format: str | None = LogFormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a task stream: one episode per operator, the memory learning as it goes."""
    with exported_settings(shape_budget, memory_limit, time_limit, tolerance):
        _stream_command("run", as_json=as_json, log_format=log_format, policies=[policy], model=model, suite=suite,
                        suite_format=suite_format, order=order, seed=seed, limit=limit, backend=backend,
                        budget=budget, tuning_budget=tuning_budget, namespace=namespace, run_id=run_id,
                        run_dir=run_dir,
                        frozen_memory=frozen_memory, top_k=top_k, params=param, adoption=adoption,
                        scale=ScaleOptions(ray=ray, ray_cpus=ray_cpus, ray_insecure=ray_insecure, eval_slots=eval_slots,
                                           max_model_calls=max_model_calls))


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
    tuning_budget: int | None = TuningBudgetOption,
    namespace: str = typer.Option(DEFAULT_NAMESPACE, "--namespace", "-n",
                                  help="Starting memory: every policy starts from an identical copy."),
    run_id: str | None = typer.Option(None),
    run_dir: Path | None = RunDirOption,
    frozen_memory: Path | None = typer.Option(None, help="Transfer mode for every policy (read-only)."),
    top_k: int | None = typer.Option(None, min=1),
    param: list[str] = ParamOption,
    adoption: str | None = AdoptionOption,
    shape_budget: str | None = ShapeBudgetOption,
    tolerance: str | None = ToleranceOption,
    memory_limit: int | None = MemoryLimitOption,
    time_limit: float | None = TimeLimitOption,
    ray: str | None = RayOption,
    ray_cpus: int | None = RayCpusOption,
    ray_insecure: bool = RayInsecureOption,
    eval_slots: int = EvalSlotsOption,
    max_model_calls: int | None = MaxModelCallsOption,
    log_format: str | None = LogFormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Run several memory policies on the same stream, model, backend and budget; one table."""
    chosen = [p.strip() for p in policies.split(",") if p.strip()]
    if len(chosen) < 1:
        raise ConfigurationError("--policies needs at least one policy")
    with exported_settings(shape_budget, memory_limit, time_limit, tolerance):
        _stream_command("compare", as_json=as_json, log_format=log_format, policies=chosen, model=model, suite=suite,
                        suite_format=suite_format, order=order, seed=seed, limit=limit, backend=backend,
                        budget=budget, tuning_budget=tuning_budget, namespace=namespace, run_id=run_id,
                        run_dir=run_dir,
                        frozen_memory=frozen_memory, top_k=top_k, params=param, adoption=adoption,
                        scale=ScaleOptions(ray=ray, ray_cpus=ray_cpus, ray_insecure=ray_insecure, eval_slots=eval_slots,
                                           max_model_calls=max_model_calls))


def report(
    run_dir: Path = typer.Argument(..., help="A run directory with <policy>.jsonl record files."),
    as_json: bool = JsonOption,
) -> None:
    """Write the Markdown and HTML reports of a finished (or interrupted) run."""
    if not run_dir.is_dir():  # before the report's libraries load: a typo is refused at once
        raise ConfigurationError(f"{run_dir}: no such run directory (one written by `kernelsage run` or `compare`, "
                                 "e.g. runs/<run id>)")
    files = sorted(run_dir.glob("*.jsonl"))
    if not files:
        raise ConfigurationError(f"{run_dir}: no <policy>.jsonl record files")
    from kernelsage.evals.metrics import summarize
    from kernelsage.evals.records import read_records, read_run_metadata
    from kernelsage.evals.report import write_report

    by_policy = {f.stem: read_records(f) for f in files}
    metadata = read_run_metadata(run_dir)  # the run's notes (e.g. the demo's), why it stopped, its hot rules
    paths = write_report(by_policy, run_dir / "report", title=f"kernelsage run {run_dir.name}",
                         notes=metadata.report_notes() if metadata else (),
                         hot_rules=metadata.hot_rules if metadata else None)
    if as_json:
        print_json({"report": str(paths.html.resolve()), "markdown": str(paths.markdown.resolve()),
                    "summary": {p: summarize(r).to_dict() for p, r in by_policy.items()}})
    else:
        say(f"report: {paths.html}\nmarkdown: {paths.markdown}")
