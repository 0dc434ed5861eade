"""The ablation study of docs/ablation.md: every published sign judged on paired per-seed figures.

Runs the arms (policies, and sage with one setting changed) on the orders each claim needs, for --seeds
seeds, all streams in one pool of --workers processes on a fresh embedded PostgreSQL + pgvector (or
DATABASE_URL with --use-database-url), then judges every claim of simulator/claims.py and prints one
Markdown table (mean difference [95% interval], verdict) and, last, one JSON line with every seed's
figures. Streams that ended are appended to --log as they end, so a stopped run keeps them.

    nice -n 5 .venv/bin/python bench/simulate_ablation.py --seeds 10 --episodes 90 --workers 2 \\
        --out /tmp/ablation.json

With --warm-start N1,N2,... it runs instead each policy from a cold start (the knowledge pack) and from a warm
start of N mined lessons (simulator/mined.py), same seeds and streams, and prints warm - cold per policy.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelsage.evals.simulator.claims import CLAIMS, ORDERS, WARM_MEASURES, judge, warm_arm, warm_start_rows
from kernelsage.evals.simulator.dispatch import in_process, process_pool
from kernelsage.evals.simulator.measures import SHARES, interval
from kernelsage.evals.simulator.mined import WarmStart, mine
from kernelsage.evals.simulator.run import StreamSpec
from kernelsage.evals.simulator.standin import StandInConfig
from kernelsage.evals.simulator.world import WorldConfig, build_world
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.embedded import embedded_database_url
from kernelsage.memory_backend.params import ALIASES, SageParams
from kernelsage.memory_backend.store import MemoryStore

POLICIES = ("sage", "uniform", "atu-only", "random-ugc", "none")
VARIANTS = {"sage gamma=0": {"gamma": 0.0}, "sage gamma=1": {"gamma": 1.0}, "sage B=500": {"hot_budget_tokens": 500}}


def arms(args: argparse.Namespace) -> dict[tuple[str, str], Any]:
    """(arm, order) -> the settings of its streams: policy, params, stand-in, warm start."""
    params = SageParams().with_overrides(**{ALIASES.get(k, k): v for k, v in args.param})
    standin = StandInConfig().with_overrides(**dict(args.standin))
    if args.level3_correct_logit is not None:
        standin = replace(standin, correct_logit=(*standin.correct_logit[:2], args.level3_correct_logit))
    if args.warm_start:
        return {(warm_arm(p, n), o): (p, params, standin, WarmStart(lessons=n).with_overrides(**dict(args.mined)) if n else None)
                for p in args.policies.split(",") for n in (0, *args.warm_start) for o in args.orders.split(",")}
    found = {(p, o): (p, params) for p in args.policies.split(",") for o in args.orders.split(",")}
    for name, overrides in VARIANTS.items() if args.variants else ():
        found[(name, "mixed")] = ("sage", params.with_overrides(**overrides))
    return {key: (policy, p, standin, None) for key, (policy, p) in found.items()}


def cell_text(row: dict[str, Any]) -> str:
    scale, digits = (100, 1) if row["measure"] in SHARES else (1, 2)
    if row["mean"] is None:
        return "n/a"
    bounds = "" if row["low"] is None else f" [{scale * row['low']:+.{digits}f}, {scale * row['high']:+.{digits}f}]"
    return f"{scale * row['mean']:+.{digits}f}{bounds}"


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| claim | order | measure | difference [95% interval] | verdict | detectable (80% power) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        scale = 100 if row["measure"] in SHARES else 1
        power = "n/a" if row["detectable"] is None else f"{scale * row['detectable']:.{1 if scale == 100 else 2}f}"
        print(f"| {row['claim']} | {row['order']} | {row['measure']} | {cell_text(row)} | {row['verdict']} | {power} |")


def print_tables(values: dict[tuple[str, str], dict[str, list[Any]]]) -> list[dict[str, Any]]:
    """The claims' table; for a warm-start run instead, the arms' means and warm - cold per policy."""
    warm_rows = warm_start_rows(values)
    if not warm_rows:
        rows = judge(values, CLAIMS)
        print_table(rows)
        return rows
    print("| arm | order | " + " | ".join(WARM_MEASURES) + " |")
    print("|---|---|" + "---|" * len(WARM_MEASURES))
    for (arm, order), figures in values.items():
        means = [interval(figures[m])["mean"] for m in WARM_MEASURES]
        print(f"| {arm} | {order} | " + " | ".join(
            "n/a" if v is None else f"{100 * v:.1f}" if m in SHARES else f"{v:.2f}"
            for m, v in zip(WARM_MEASURES, means, strict=True)) + " |")
    print()
    print_table(warm_rows)
    return warm_rows


def mined_summary(world: WorldConfig, seeds: range, sizes: list[int], mined: dict[str, float]) -> None:
    """What the warm starts hold: per N, the kinds of the mined lessons over the seeds and their true value
    (mean over all operators, and over those they help)."""
    for n in sizes:
        kinds: dict[str, int] = {}
        overall, helped, count = [], [], 0
        for seed in seeds:
            built = build_world(world, seed)
            for m in mine(built, WarmStart(lessons=n).with_overrides(**mined), seed):
                kinds[built.lessons[m.lesson].kind] = kinds.get(built.lessons[m.lesson].kind, 0) + 1
                values = built.values[m.lesson]
                overall.append(float(values.mean()))
                helped.append(float((values > 0).mean()))
                count += 1
        print(f"mined={n}: {count / len(seeds):.1f} lessons per seed, kinds {dict(sorted(kinds.items()))}, "
              f"mean value over all operators {sum(overall) / max(1, count):+.3f}, "
              f"share of operators helped {sum(helped) / max(1, count):.2f}")


def judge_log(path: Path) -> None:
    """Judge the seeds of a log for which every (arm, order) stream ended."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    keys = {(r["arm"], r["order"]) for r in lines}
    by_seed: dict[int, dict[tuple[str, str], dict[str, Any]]] = {}
    for r in lines:
        by_seed.setdefault(r["seed"], {})[(r["arm"], r["order"])] = r["measures"]
    seeds = sorted(seed for seed, got in by_seed.items() if set(got) == keys)
    values = {key: {m: [by_seed[seed][key].get(m) for seed in seeds] for m in by_seed[seeds[0]][key]}
              for key in keys}
    print(f"{len(seeds)} whole seeds ({seeds[0]}-{seeds[-1]}), {len(lines)} streams in the log; "
          f"{sum(r['seconds'] for r in lines):.0f} stream-seconds\n")
    print_tables(values)
    print(json.dumps({"seeds": seeds, "problems": [p for r in lines for p in r["problems"]],
                      "values": {f"{a}|{o}": v for (a, o), v in values.items()}}))


def _pair(text: str) -> tuple[str, float]:
    name, _, value = text.partition("=")
    return name, float(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=90)
    parser.add_argument("--operators-per-level", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--no-variants", dest="variants", action="store_false", help="no gamma / B arms")
    parser.add_argument("--general-share", type=float, help="world: share of general lessons (the other kinds "
                        "keep their proportions); decides how much a rule shown to every operator can help")
    parser.add_argument("--level3-correct-logit", type=float, help="stand-in: logit of a compiled level-3 "
                        "kernel being correct with nothing used (default -3.0): how hard level 3 is alone")
    parser.add_argument("--pack-per-lesson", type=int, default=1, help="world: items of each lesson in the "
                        "knowledge pack every memory starts with (0: an empty memory; default 1)")
    parser.add_argument("--param", type=_pair, action="append", default=[], help="NAME=VALUE for every arm")
    parser.add_argument("--standin", type=_pair, action="append", default=[], help="stand-in NAME=VALUE")
    parser.add_argument("--out", type=Path, default=Path("ablation.json"), help="the JSON result")
    parser.add_argument("--log", type=Path, help="one JSON line per stream as it ends (default: OUT.log)")
    parser.add_argument("--warm-start", type=lambda t: [int(n) for n in t.split(",")], default=[],
                        help="N1,N2,...: each policy cold and from N mined lessons (no claims, no variants)")
    parser.add_argument("--mined", type=_pair, action="append", default=[], help="warm-start NAME=VALUE "
                        "(keep_share, false_keep)")
    parser.add_argument("--use-database-url", action="store_true")
    parser.add_argument("--from-log", type=Path, help="judge the whole seeds of a (stopped) run's log; run nothing")
    args = parser.parse_args()
    if args.from_log:
        judge_log(args.from_log)
        return
    world = WorldConfig(operators_per_level=args.operators_per_level)
    if args.general_share is not None:
        rest = {k: v for k, v in world.kind_shares.items() if k != "general"}
        scale = (1 - args.general_share) / sum(rest.values())
        world = replace(world, kind_shares={"general": args.general_share, **{k: v * scale for k, v in rest.items()}})
    settings = arms(args)
    specs, arm_of = [], {}
    if args.warm_start:
        mined_summary(world, range(args.first_seed, args.first_seed + args.seeds), args.warm_start, dict(args.mined))
    for (arm, order), (policy, params, standin, warm) in settings.items():
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            spec = StreamSpec(policy=policy, order=order, seed=seed, episodes=args.episodes, world=world,
                              params=params, standin=standin, warm_start=warm,
                              seed_items_per_lesson=args.pack_per_lesson)
            specs.append(spec)
            arm_of[id(spec)] = arm
    specs.sort(key=lambda s: (s.seed, s.policy == "none"))  # seed by seed: a stopped run has whole seeds
    log = args.log or args.out.with_suffix(".log")
    values: dict[tuple[str, str], dict[str, list[Any]]] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ks-ablation-") as data:
        Path(data).chmod(0o755)
        url = os.environ["DATABASE_URL"] if args.use_database_url else embedded_database_url(Path(data) / "pgdata")
        store = MemoryStore(open_pool(url), owns_pool=True)
        by_key = {(s.policy, s.order, s.seed, s.params, s.standin, s.warm_start): arm_of[id(s)] for s in specs}
        dispatch = in_process(store, lambda _: False) if args.workers == 1 else \
            process_pool(url, args.workers, lambda _: False)
        outcomes = {}
        with log.open("w") as out:
            for done, outcome in enumerate(dispatch(specs), 1):
                s = outcome.spec
                arm = by_key[(s.policy, s.order, s.seed, s.params, s.standin, s.warm_start)]
                outcomes[(arm, s.order, s.seed)] = outcome
                out.write(json.dumps({"arm": arm, "order": s.order, "seed": s.seed, "seconds": outcome.seconds,
                                      "measures": outcome.measures, "problems": outcome.problems}) + "\n")
                out.flush()
                print(f"{done}/{len(specs)} {arm} {s.order} s{s.seed} {outcome.seconds:.0f} s "
                      f"({time.perf_counter() - start:.0f} s elapsed)", flush=True)
        store.close()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    for arm, order in settings:
        per_seed = [outcomes[(arm, order, seed)].measures for seed in seeds]
        values[(arm, order)] = {m: [ms.get(m) for ms in per_seed] for m in per_seed[0]}
    print(f"\n{args.seeds} seeds x {args.episodes} episodes, {len(specs)} streams, "
          f"{time.perf_counter() - start:.0f} s\n")
    rows = print_tables(values)
    problems = [p for o in outcomes.values() for p in o.problems]
    result = {"settings": {**{k: str(v) for k, v in vars(args).items()}, "variants": VARIANTS},
              "wall_s": time.perf_counter() - start, "rows": rows, "problems": problems,
              "values": {f"{arm}|{order}": v for (arm, order), v in values.items()}}
    args.out.write_text(json.dumps(result))
    print(json.dumps({"wall_s": result["wall_s"], "problems": problems, "out": str(args.out)}))


if __name__ == "__main__":
    main()
