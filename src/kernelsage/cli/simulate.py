"""`kernelsage simulate`: the memory methods in a synthetic world with a stand-in generator (no model)."""

from __future__ import annotations

import datetime as dt
from contextlib import nullcontext
from pathlib import Path

import typer

from kernelsage.cli.common import JsonOption, console, err_console, open_store, print_json, say
from kernelsage.cli.scale_options import RayCpusOption, RayInsecureOption, RayOption, ScaleOptions
from kernelsage.errors import ConfigurationError

DEFAULT_POLICIES = "sage,uniform,atu-only,random-ugc,none,value"


def _names(text: str, what: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ConfigurationError(f"{what} needs at least one name")
    return names


def _settings(texts: list[str], what: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for text in (t for item in texts for t in item.replace(",", " ").split()):
        name, sep, raw = text.partition("=")
        try:
            found[name.strip()] = float(raw)
        except ValueError:
            sep = ""
        if not sep:
            raise ConfigurationError(f"cannot read {what} {text!r}: write NAME=NUMBER")
    return found


def _cluster(target):
    """The Ray cluster `--ray` names, joined for the command; nothing without it."""
    if target is None:
        return nullcontext()
    from kernelsage.scale.cluster import connected

    return connected(target, say=lambda text: say(text, to=err_console))


def simulate(
    policies: str = typer.Option(DEFAULT_POLICIES, help="Comma-separated memory policies."),
    orders: str = typer.Option("curriculum,mixed,level:3", help="Comma-separated orders: curriculum, mixed, level:N."),
    seeds: int = typer.Option(5, min=1, help="Seeds (a new world and stand-in draws each); intervals are over them."),
    episodes: int = typer.Option(150, min=1, help="Episodes per stream."),
    first_seed: int = typer.Option(0, help="The first seed."),
    operators_per_level: int = typer.Option(16, min=1, help="Operators per level in the world (3 levels)."),
    param: list[str] = typer.Option([], "--param", "-p", help="A memory hyperparameter NAME=VALUE (delta, beta, "
                                    "gamma, eta_min, B, K_ado, K_op, mu, T, top_k, ...), repeatable."),
    standin: list[str] = typer.Option([], "--standin", help="A stand-in setting NAME=VALUE (false_claim, "
                                      "silent_use, discernment, use_base, timing_noise, ...), repeatable."),
    sweep: list[str] = typer.Option([], "--sweep", help="NAME=V1,V2,... : rerun the first order once per value "
                                    "(a memory hyperparameter or a stand-in setting), repeatable."),
    sweep_policies: str = typer.Option("sage,uniform", help="Policies run in each sweep."),
    warm_start: str = typer.Option("cold", "--warm-start", help="The memory every policy starts from: cold (the "
                                   "knowledge pack) or mined[:N] (and N mined speed lessons; N = 3 by default)."),
    mined: list[str] = typer.Option([], "--mined", help="A warm-start setting NAME=VALUE (keep_share, false_keep), "
                                    "repeatable."),
    out: Path | None = typer.Option(None, "--out", help="Report folder (default: runs/simulate-<time>)."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write the Markdown/HTML report with plots."),
    ray: str | None = RayOption,
    ray_cpus: int | None = RayCpusOption,
    ray_insecure: bool = RayInsecureOption,
    as_json: bool = JsonOption,
) -> None:
    """Check what the memory learns in a seeded synthetic world: a stochastic STAND-IN plays the generator
    (no language model), the real store, policies, commit and consolidation do the rest."""
    from dataclasses import replace

    from rich.progress import Progress

    target = ScaleOptions(ray=ray, ray_cpus=ray_cpus, ray_insecure=ray_insecure).target()  # before anything heavy loads

    from kernelsage.evals.simulator.mined import parse_warm_start
    from kernelsage.evals.simulator.report import write_simulation_report
    from kernelsage.evals.simulator.standin import StandInConfig
    from kernelsage.evals.simulator.study import StudySpec, parse_sweep, run_study, run_sweep
    from kernelsage.evals.simulator.world import WorldConfig, build_world, stream_operators
    from kernelsage.memory_backend.params import SageParams, parse_overrides

    overrides = parse_overrides([p for text in param for p in text.replace(",", " ").split()])
    if overrides.get("adoption", "declared") != "declared":
        raise ConfigurationError("the simulator's stand-in writes no code to audit: adoption=audited applies to "
                                 "`run` and `compare`")
    warm = parse_warm_start(warm_start)
    mined_settings = _settings(mined, "--mined")
    if mined_settings and warm is None:
        raise ConfigurationError("--mined sets how a warm start is mined: give --warm-start mined[:N] with it")
    spec = StudySpec(policies=_names(policies, "--policies"), orders=_names(orders, "--orders"), seeds=seeds,
                     episodes=episodes, first_seed=first_seed,
                     warm_start=warm.with_overrides(**mined_settings) if warm else None,
                     world=WorldConfig(operators_per_level=operators_per_level),
                     standin=StandInConfig().with_overrides(**_settings(standin, "--standin")),
                     params=SageParams().with_overrides(**overrides))
    world = build_world(spec.world, first_seed)
    for order in spec.orders:  # a bad order fails before any stream runs
        stream_operators(world, order, 1, first_seed)
    sweeps_asked = [parse_sweep(text) for text in sweep]
    sweep_spec = replace(spec, policies=_names(sweep_policies, "--sweep-policies")) if sweeps_asked else spec
    streams = len(spec.policies) * len(spec.orders) * seeds
    streams += sum(len(values) for _, values in sweeps_asked) * len(sweep_spec.policies) * seeds
    with open_store() as store, _cluster(target), Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("simulating", total=streams)

        def advance(stream, result) -> None:
            bar.update(task, advance=1, description=f"{stream.policy} {stream.order} seed {stream.seed}")

        study_dispatch = sweep_dispatch = None
        if target is not None:  # every stream a Ray task on the shared store (docs/scale.md)
            from kernelsage.memory_backend.database import database_url
            from kernelsage.scale.simulate import ray_dispatch

            study_dispatch = ray_dispatch(database_url(), lambda stream: stream.seed == spec.first_seed)
            sweep_dispatch = ray_dispatch(database_url(), lambda stream: False)
        study = run_study(store, spec, progress=advance, dispatch=study_dispatch)
        sweeps = [run_sweep(store, sweep_spec, name, values, progress=advance, dispatch=sweep_dispatch)
                  for name, values in sweeps_asked]
    payload = {**study.to_json(), "sweeps": [s.to_json() for s in sweeps]}
    if report:
        folder = out or Path("runs") / f"simulate-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
        paths = write_simulation_report(study, sweeps, folder, title="kernelsage simulation (stand-in generator)")
        payload["report"] = str(paths.html.resolve())
    if as_json:
        print_json(payload)
        return
    if report:
        console.print(paths.markdown.read_text(encoding="utf-8"), markup=False, highlight=False)
        console.print(f"\nreport: {paths.html}")
    else:  # Markdown tables, unwrapped: thirteen columns do not fit a terminal's width anyway
        from kernelsage.evals.simulator.report import study_tables

        for found in study_tables(study):
            console.print(f"\n{found.heading}", markup=False, highlight=False)
            for row in (found.headers, ["---"] * len(found.headers), *found.rows):
                console.print("| " + " | ".join(row) + " |", markup=False, highlight=False, soft_wrap=True)
    for problem in study.problems:
        err_console.print(f"[bold red]invariant broken:[/] {problem}")
