"""`kernelsage tasks list|show|conform` and `kernelsage check`: browse task suites, see a task's kernel
interface, say which tasks of a checkout a backend runs as the suite's harness would, check one candidate."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from kernelsage.cli.common import JsonOption, console, err_console, print_json
from kernelsage.cli.task_options import (
    MemoryLimitOption,
    ShapeBudgetOption,
    TimeLimitOption,
    ToleranceOption,
    backend_options,
)
from kernelsage.errors import ConfigurationError

tasks_app = typer.Typer(help="Browse task suites (built-in, KernelBench, NPUKernelBench).", no_args_is_help=True)

SuiteOption = typer.Option("builtin", "--suite", "-s", help="'builtin' or a path to a suite file or directory.")
FormatOption = typer.Option("auto", "--format", "-f",
                            help="auto | suite | kernelbench | multikernelbench | npukernelbench.")
UNTIMED_WORDS = "not timed: the interpreter checks correctness only"
ToleranceRuleOption = typer.Option(
    None, "--tolerance-rule", envvar="KERNELSAGE_TOLERANCE_RULE", metavar="RULE",
    help="KernelBench's tolerance rule: 'checkout' (as the checkout's eval.py sets it; the default) or 'published' "
         "(v0/v0.1: 1e-2 for every dtype). Env: KERNELSAGE_TOLERANCE_RULE.")


@tasks_app.command("list")
def list_tasks(
    suite: str = SuiteOption,
    format: str = FormatOption,
    level: int | None = typer.Option(None, "--level", "-l", help="Only tasks of this level."),
    shape_budget: str | None = ShapeBudgetOption,
    as_json: bool = JsonOption,
) -> None:
    """List the tasks of a suite (task files that fail to load are reported and skipped)."""
    from kernelsage.cli.task_listing import builtin_listing, suite_listing

    if suite == "builtin" and format in ("auto", "suite"):
        listing = builtin_listing(format, shape_budget)  # cached: no torch until a task file changes
    else:
        from kernelsage.tasks.loaders import load_suite

        listing = suite_listing(load_suite(suite, format, shape_budget=shape_budget))
    tasks = [task for task in listing["tasks"] if level is None or task["level"] == level]
    if as_json:
        print_json({**listing, "tasks": tasks})
        return
    table = Table(title=f"{len(tasks)} tasks ({suite})")
    for column in ("id", "level", "category", "cases", "description"):
        table.add_column(column, overflow="fold", max_width=70 if column == "description" else None)
    for task in tasks:
        table.add_row(escape(task["id"]), str(task["level"]), escape(task["category"]), str(len(task["cases"])),
                      escape(task["description"]))
    console.print(table)
    if listing["tracks"]:
        console.print("tracks of this checkout: " + ", ".join(
            track["language"] + (f" (--backend {track['backend']})" if track["backend"] else "")
            for track in listing["tracks"]), highlight=False)
    for problem in listing["problems"]:
        err_console.print(f"[yellow]skipped:[/] {escape(problem['message'])}", highlight=False)


@tasks_app.command("show")
def show_task(
    task_id: str = typer.Argument(..., help="Task id (see `kernelsage tasks list`)."),
    suite: str = SuiteOption,
    format: str = FormatOption,
    shape_budget: str | None = ShapeBudgetOption,
    tolerance: str | None = ToleranceOption,
    tolerance_rule: str | None = ToleranceRuleOption,
    as_json: bool = JsonOption,
) -> None:
    """The kernel's interface: for every case, the inputs in order with dtypes and shapes, the attributes and
    the outputs, worked out on the meta device without allocating the tensors; and the tolerance that judges
    it, with the suite rule it comes from."""
    from kernelsage.tasks.interface import case_interface
    from kernelsage.tasks.loaders import find_task, load_suite
    from kernelsage.tasks.model import tolerance_report
    from kernelsage.tasks.scaling import format_bytes

    # Only this task is loaded and scaled: a whole suite takes minutes to scale.
    task = find_task(load_suite(suite, format, shape_budget=shape_budget, tolerance=tolerance, task_ids=[task_id],
                                tolerance_rule=tolerance_rule), task_id)
    interfaces = [case_interface(task, case) for case in task.cases]
    scaling = task.origin.scaling if task.origin else None
    judged = tolerance_report(task)
    if as_json:
        print_json({**task.summary(), "perf_case": task.perf_case.name,
                    "cases": [{**interface.to_dict(), "params": dict(case.params), "dtype": case.dtype}
                              for case, interface in zip(task.cases, interfaces, strict=True)],
                    "scaling": scaling.to_dict() if scaling else None, "tolerance": judged})
        return
    console.print(f"[bold]{escape(task.id)}[/] (level {task.level}, {escape(task.category)}; "
                  f"{len(task.cases)} cases, performance case {escape(task.perf_case.name)})", highlight=False)
    if task.origin:
        console.print(f"source: {escape(task.origin.path)}", highlight=False, soft_wrap=True)
    console.print(f"tolerance: {escape(judged['text'])}", highlight=False, soft_wrap=True)
    for case, interface in zip(task.cases, interfaces, strict=True):
        params = ", ".join(f"{name}={value!r}" for name, value in case.params.items())
        console.print(escape(interface.describe() + (f"\n  params: {params}" if params else "")), highlight=False,
                      soft_wrap=True)
    if scaling is not None:
        console.print(f"scaled to {format_bytes(scaling.budget)} per case: "
                      + "; ".join(c.describe() for c in scaling.cases)
                      + (f"; left out: {', '.join(scaling.dropped)}" if scaling.dropped else ""), highlight=False,
                      soft_wrap=True)


@tasks_app.command("conform")
def conform_tasks(
    suite: str = typer.Option(..., "--suite", "-s", help="A suite's checkout (its root or any folder below it)."),
    backend: str = typer.Option("ascend", "--backend", "-b", help="ascend | triton."),
    format: str = FormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Whether the backend can run each task of a checkout as the suite's own harness would, and if not why
    (one line per task; a summary at the end). Reads the checkout's files only: nothing is built or run on an
    accelerator (references run on the CPU for small cases, as a stream checks them)."""
    if backend not in CONFORM_BACKENDS:
        raise ConfigurationError(f"--backend {backend!r}: conform knows {' and '.join(CONFORM_BACKENDS)}")
    from kernelsage.tasks.conformance import conform
    from kernelsage.tasks.loaders import load_suite

    report = load_suite(suite, format)
    chosen = report.tasks[0].origin.format if report.tasks and report.tasks[0].origin else format
    result = conform(report, suite=suite, format=chosen, backend=backend, checks=route_checks(backend))
    if as_json:
        print_json(result.to_dict())
        return
    for verdict in result.verdicts:
        answer = f"runnable ({', '.join(r for r, why in verdict.routes.items() if not why)})" if verdict.runnable \
            else f"refused: {verdict.reason}"
        console.print(f"{escape(verdict.task)}: {escape(answer)}", highlight=False, soft_wrap=True)
    summary = result.summary()
    console.print(f"{summary['runnable']} of {summary['tasks']} tasks runnable by the {backend} backend as the "
                  f"suite's harness runs them ({', '.join(result.routes) or 'no route'}); {summary['refused']} "
                  "refused" + ("" if not summary["by_reason"] else ": " + "; ".join(
                      f"{count} {escape(kind)}" for kind, count in summary["by_reason"].items())),
                  highlight=False, soft_wrap=True)


CONFORM_BACKENDS = ("ascend", "triton")


def route_checks(backend: str) -> dict[str, Any]:
    """The backend's check of a task per route (`tasks.conformance.RouteCheck`): the Ascend route's rules for
    the ascend backend's routes; for triton, triton-ascend's on MultiKernelBench's `triton_ascend` track (the
    `triton` tracks run on GPUs, where the triton backend runs what loads and runs)."""
    if backend == "ascend":
        from kernelsage.tools.ascend.conformance import ascend_conformance

        def ascend(task: Any, cases: list[dict[str, Any]]) -> str:
            return ascend_conformance(task)

        return {route: ascend for route in ("NPUKernelBench", "ascendc", "ascendc_direct_launch", "kernelsage")}
    from kernelsage.tools.triton.ascend_frontend import npu_task_problem

    return {"triton_ascend": lambda task, cases: npu_task_problem(cases)}


UnsafeOption = typer.Option(
    False, "--unsafe-no-isolation",
    help="DANGEROUS: compile and run the candidate even where bubblewrap isolation is unavailable; it can then "
         "read your files and environment. Only for code you trust.")


DeviceOption = typer.Option(
    None, "--device", help="The triton backend's device: interpret (CPU, correctness only), cuda, npu, or npu-frontend "
                           "(triton-ascend's compiler without CANN: compile feedback only); default "
                           "KERNELSAGE_TRITON_DEVICE, else cuda where torch sees a GPU, else interpret.")


def check(
    task_id: str = typer.Option(..., "--task", "-t", help="Task id (see `kernelsage tasks list`)."),
    source: Path = typer.Option(..., "--source", help="The candidate kernel source file, or the directory of a "
                                                      "candidate of several files (op_host + op_kernel)."),
    backend_name: str = typer.Option("cpu", "--backend", "-b", help="Kernel backend."),
    suite: str = SuiteOption,
    format: str = FormatOption,
    unsafe_no_isolation: bool = UnsafeOption,
    shape_budget: str | None = ShapeBudgetOption,
    tolerance: str | None = ToleranceOption,
    tolerance_rule: str | None = ToleranceRuleOption,
    memory_limit: int | None = MemoryLimitOption,
    time_limit: float | None = TimeLimitOption,
    device: str | None = DeviceOption,
    as_json: bool = JsonOption,
) -> None:
    """Compile, verify and (when correct) profile one candidate, exactly as `eval` and the agent do; exit code 0
    only when it is correct (verified, and its profiled output correct)."""
    from kernelsage.cli.candidate_source import check_source_exists, read_candidate
    from kernelsage.tasks.loaders import find_task, load_suite
    from kernelsage.tasks.loaders.tracks import track_for, track_note
    from kernelsage.tools import get_backend
    from kernelsage.tools.backend import files_to_write
    from kernelsage.tools.evaluator import evaluate_candidate

    check_source_exists(source)
    loaded = load_suite(suite, format, shape_budget=shape_budget, tolerance=tolerance, task_ids=[task_id],
                        tolerance_rule=tolerance_rule)
    task = find_task(loaded, task_id)  # only this task is loaded and scaled
    note = track_note(loaded.tracks, task.origin.format if task.origin else format, backend_name)
    if note:
        err_console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    options: dict[str, Any] = backend_options(memory_limit, time_limit)
    if device is not None:
        if backend_name != "triton":
            raise ConfigurationError(f"--device chooses a triton device; the {backend_name} backend has none")
        options["device"] = device
    if backend_name == "triton":
        options["tasks"] = (task,)  # npu-frontend compiles for the task's cases, which compile is not handed
    if unsafe_no_isolation:
        err_console.print("[bold red]WARNING: --unsafe-no-isolation: where bubblewrap is unavailable the "
                          "candidate is compiled and run WITHOUT ISOLATION, with your user's access to files, "
                          "processes and network.[/]", highlight=False)
        options["unsafe_no_isolation"] = True
    with closing(get_backend(backend_name, **options)) as backend:
        files = read_candidate(source, files_to_write(backend, task), task_id=task.id, backend=backend_name)
        evaluation = evaluate_candidate(backend, task, files)
    report: dict[str, Any] = {
        "task": task.id, "backend": backend_name, "correct": evaluation.correct, "status": evaluation.status.value,
        "latency": evaluation.latency, "reference_latency": evaluation.reference_latency,
        "suite_tracks": [track.to_dict() for track in track_for(loaded.tracks, backend_name)],
        "compile": evaluation.compile.to_dict(), "verify": evaluation.verify.to_dict() if evaluation.verify else None,
        "profile": evaluation.profile.to_dict() if evaluation.profile else None,
    }
    if as_json:
        print_json(report)
    else:
        _print_check(report, evaluation)
    raise typer.Exit(0 if evaluation.correct else 1)


def _print_check(report: dict[str, Any], evaluation: Any) -> None:
    from kernelsage.tools.diagnostics import describe_mismatches, summarize_compiler_errors
    from kernelsage.tools.results import Status

    compiled, verified, profiled = evaluation.compile, evaluation.verify, evaluation.profile
    table = Table(title=f"check {report['task']} on {report['backend']}: "
                        f"{'correct' if evaluation.correct else evaluation.status.value}", show_header=False)
    table.add_row("compile", f"{compiled.status.value} in {compiled.seconds:.2f} s"
                  + (" (cached)" if compiled.cached else ""))
    if not compiled.ok:
        table.add_row("", escape(summarize_compiler_errors(compiled) or compiled.reason or compiled.log[-500:]))
    elif verified is not None and verified.status is Status.HARNESS_ERROR and compiled.log:
        table.add_row("", escape(compiled.log.splitlines()[0]))  # how far a compile-only device got
    if verified is not None:
        table.add_row("verify", f"{verified.status.value}: {len(verified.cases)} case runs, {verified.trials} "
                                f"trials, seed {verified.seed}")
        if not verified.correct:
            table.add_row("", escape(describe_mismatches(verified) or verified.message))
    if profiled is not None:
        if not profiled.timed:  # an interpreter's profile: the output checked, nothing timed
            table.add_row("profile", UNTIMED_WORDS)
        elif profiled.candidate and profiled.reference:
            table.add_row("profile", f"candidate {profiled.candidate.mean * 1e3:.3f} ms (median "
                                     f"{profiled.candidate.median * 1e3:.3f} ms, cv {profiled.candidate.cv:.1%}), "
                                     f"reference {profiled.reference.mean * 1e3:.3f} ms (cv "
                                     f"{profiled.reference.cv:.1%}), speedup {profiled.speedup:.2f}x on "
                                     f"{profiled.case!r} over {profiled.input_sets} input sets")
        else:
            table.add_row("profile", profiled.status.value)
        if profiled.message and profiled.timed:
            table.add_row("", escape(profiled.message))
    console.print(table)
