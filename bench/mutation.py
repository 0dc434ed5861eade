"""Mutation benchmark: how many wrong kernels does the judge reject? Every honest reference kernel (the cpu and
triton examples, the honest kernels the tests keep: bench/mutation_kernels.py) is mutated by class (numeric
constants, loop/mask boundaries, axis/stride, a dropped term, lowered accumulation precision, tie/NaN handling:
bench/mutants.py), and each mutant is judged through the backends' public API (CpuBackend compile + verify,
TritonBackend compile + verify on the `interpret` device).

    .venv/bin/python bench/mutation.py [--backend cpu|triton] [--cls ties] [--task l2_softmax] [--limit 40]
                                       [--per-rule 3 | --all] [--jobs 2] [--json runs/mutation.json] [--list]

Each mutant gets one verify of 9 trials with a fixed seed: trials 0-2 are the standard battery (what the
backends' default verify checks), 3-8 the extra one. Outcomes:
  build-failed  compile refused it (on triton also: the interpreter could not compile it);
  killed        verify said not correct (the record says whether the standard or only the extra battery did);
  equivalent    ("likely equivalent", counted neither way) it passed, and a differential run
                (bench/mutation_stress.py) against the unmutated kernel on stress inputs aimed at every class
                (ties, the NaN/inf the task promises answers for, tiny, large and past-half-range values, close
                pairs where a difference cancels, sizes + 1, skewed sizes) found every output within the task's
                own tolerance of the reference (or its own precision check) wherever the unmutated kernel's is,
                and equal values wherever the unmutated kernel's is not;
  equivalent-by-contract  (counted neither way, shown in a column of its own) likewise, except that it differs
                on stress sets outside the task's contract: NaN fed to a task whose description promises
                nothing for NaN (the contract: PROMISES in bench/mutation_stress.py);
  survived      it passed, and is not equivalent: a wrong kernel the task's inputs do not expose; the report
                says which stress sets tell it apart and the largest error seen. An overrun by one (`<` -> `<=`
                on a loop or mask bound) is never called equivalent, as it touches memory past the end that no
                output comparison sees.
Score = killed / (killed + survived). A mutant's error fingerprint on the task's own cases (per case and trial:
mismatch counts, absolute and relative errors) only tells the report whether it is bit-identical there to the
unmutated kernel; equivalence rests on the stress run.

By default at most --per-rule mutants of one rule per kernel are judged (evenly spread over its sites), and the
same edit of the same line in another kernel of the backend (the elementwise Triton examples share most lines)
is judged once; this keeps a run to a few minutes on 2 cores. --all judges every mutant.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules, also in spawned workers

from mutants import CLASSES, Mutant, mutants_of
from mutation_kernels import Reference, references

STANDARD_TRIALS = 3  # the backends' default
EXTRA_TRIALS = 6
STRESS = Path(__file__).resolve().parent / "mutation_stress.py"
OUTCOMES = ("killed", "survived", "equivalent", "equivalent-by-contract", "build-failed")
TITLES = {"equivalent-by-contract": "equivalent (outside the task's contract)"}

# -- worker side: one backend of each kind per process, built on first use ------------------------------------

_BACKENDS: dict[str, Any] = {}
_TASKS: dict[tuple[str, str], Any] = {}


def _close_backends() -> None:
    for backend, folder in _BACKENDS.values():
        backend.close()
        shutil.rmtree(folder, ignore_errors=True)
    _BACKENDS.clear()


def _backend(name: str, threads: int) -> Any:
    if name not in _BACKENDS:
        from kernelsage.tools.sandbox import Limits

        folder = tempfile.mkdtemp(prefix="ks-mutation-")
        if name == "cpu":
            from kernelsage.tools.cpu.backend import CpuBackend

            backend = CpuBackend(cache_dir=folder, threads=threads, run_limits=Limits(wall_s=20, cpu_s=60))
        else:
            from kernelsage.tools.triton.backend import TritonBackend

            backend = TritonBackend(device="interpret", cache_dir=folder, threads=threads,
                                    run_limits=Limits(wall_s=90, cpu_s=180))
        if not _BACKENDS:
            atexit.register(_close_backends)
        _BACKENDS[name] = (backend, folder)
    return _BACKENDS[name][0]


def _task(suite: str, task_id: str) -> Any:
    if (suite, task_id) not in _TASKS:
        from kernelsage.tasks.loaders import find_task, load_suite

        _TASKS[suite, task_id] = find_task(load_suite(suite, task_ids=[task_id]) if suite == "builtin"
                                           else load_suite(suite), task_id)
    return _TASKS[suite, task_id]


def fingerprint(verify: Any) -> list[list[Any]]:
    """Per case and trial, what verify measured against the reference: equal fingerprints on the same inputs mean
    outputs equal up to values that give the same errors."""
    return [[c.case, c.trial, c.passed, c.n_mismatch, c.n_unwritten, c.max_abs_error, c.mean_abs_error,
             c.max_rel_error, c.mean_rel_error] for c in verify.cases]


def stress(backend: Any, task: Any, job: dict[str, Any], mutant_path: str) -> dict[str, Any]:
    """The differential run (bench/mutation_stress.py) of the unmutated kernel against this mutant."""
    from kernelsage.tools.results import Candidate

    original = backend.compile(Candidate(task_id=task.id, files={backend.candidate_files[0]: job["original"]}))
    request = {"backend": job["backend"], "suite": job["suite"], "task_id": job["task_id"], "seed": job["seed"],
               "original": original.artifact.path, "mutant": mutant_path}
    try:
        child = subprocess.run([sys.executable, str(STRESS)], input=json.dumps(request), capture_output=True,
                               text=True, timeout=240)
        lines, returncode = child.stdout.splitlines(), child.returncode
    except subprocess.TimeoutExpired as timeout:
        lines, returncode = (timeout.stdout or b"").decode().splitlines(), "timeout"
    sets = [json.loads(line) for line in lines if line.startswith("{")]
    inside = [x for x in sets if not x.get("outside")]
    differs = [x["set"] for x in inside if x["verdict"] == "differs"]
    if returncode != 0:  # a crash (or hang) on the set after the last one reported
        differs.append(f"crashed after {sets[-1]['set'] if sets else 'start'} ({returncode})")
    largest = max((x for x in inside if x["verdict"] == "differs" and "max_abs_error" in x),
                  key=lambda x: x["max_abs_error"], default=None)
    return {"differs": differs, "same": sum(x["verdict"] == "same" for x in inside),
            "within": [x["set"] for x in inside if x["verdict"] == "within"],
            "original_fails": [x["set"] for x in sets if x.get("original_fails")],
            "outside": {x["set"]: x["outside"] for x in sets if x.get("outside") and x["verdict"] == "differs"},
            "skipped": sum(x["verdict"] == "skipped" for x in sets), "largest": largest}


def _failure(verify: Any, by: str) -> dict[str, Any]:
    failed = next((c for c in verify.cases if not c.passed), None)
    return {"passed": False, "by": by, "status": verify.status.value, "case": failed.case if failed else "",
            "message": (verify.message or verify.stderr_tail or "")[:300]}


def _worst(verify: Any) -> dict[str, float]:
    worst = max(verify.cases, key=lambda c: c.max_abs_error, default=None)
    if worst is None:
        return {}
    return {"max_abs_error": worst.max_abs_error, "max_rel_error": worst.max_rel_error, "case": worst.case,
            "atol": worst.atol, "rtol": worst.rtol}


def judge(job: dict[str, Any]) -> dict[str, Any]:
    """Compile and verify one source on the standard then the extra battery (in a worker process)."""
    started = time.perf_counter()
    from kernelsage.tools.results import Candidate

    backend = _backend(job["backend"], job["threads"])
    task = _task(job["suite"], job["task_id"])
    file_name = backend.candidate_files[0]
    compiled = backend.compile(Candidate(task_id=task.id, files={file_name: job["source"]}))
    result: dict[str, Any] = {"key": job["key"]}
    if not compiled.ok:
        result.update(compiled=False, status=compiled.status.value, message=(compiled.reason or compiled.log)[:300])
    else:
        result["compiled"] = True
        # One call for both batteries (one runner start): trials 0-2 are the standard battery (what a
        # verify(trials=3, seed) checks), the rest the extra one; a failure's trial says which caught it.
        verify = backend.verify(compiled.artifact, task, trials=STANDARD_TRIALS + EXTRA_TRIALS, seed=job["seed"])
        if not verify.correct:
            failed = next((c for c in verify.cases if not c.passed), None)
            result.update(_failure(verify, "extra" if failed and failed.trial >= STANDARD_TRIALS else "standard"))
        else:
            result.update(passed=True, fingerprint=fingerprint(verify), worst=_worst(verify))
            if job.get("original"):
                result["stress"] = stress(backend, task, job, compiled.artifact.path)
    result["seconds"] = time.perf_counter() - started
    return result


# -- driver side ----------------------------------------------------------------------------------------------

TASK_SOURCES = Path(__file__).resolve().parents[1] / "src" / "kernelsage" / "tasks"


def tasks_digest() -> str:
    """A digest of the task definitions: fingerprints compare only within one version of the cases."""
    digest = hashlib.sha256()
    for path in sorted(TASK_SOURCES.rglob("*.py")):
        digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def evenly(items: list[Any], count: int) -> list[Any]:
    """`count` items spread evenly over the list, in order (all of them when the list is no longer)."""
    if count <= 0 or len(items) <= count:
        return list(items)
    if count == 1:
        return [items[0]]
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def select(mutants: list[Mutant], per_rule: int, limit: int) -> list[Mutant]:
    """At most `per_rule` mutants of each rule per kernel (hand-written ones always kept), then at most `limit`."""
    groups: dict[tuple[str, str], list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        groups[mutant.kernel, mutant.rule].append(mutant)
    kept = {id(m) for group in groups.values() for m in evenly(group, per_rule)}
    chosen = [m for m in mutants if id(m) in kept or m.hand_written]
    return evenly(chosen, limit) if limit else chosen


EPS = "eps changes the result only for rows whose mean square is near eps or below; no case has such rows"
SWAPPED = "every case has equal sizes (or equal block counts) along the swapped dimensions"
HINTS = {
    "tie-flip": "no case has equal values where this comparison decides",
    "tie-order": "no case has equal values in a row, so the order among ties never shows",
    "nan-flip": "no case has NaN inputs",
    "ternary-to-fmax": "no case has NaN inputs (fmax drops a NaN the comparison would keep or lose)",
    "nan-dropping-maximum": "no case has NaN inputs",
    "nan-dropping-minimum": "no case has NaN inputs",
    "nan-ignoring-max": "no case has NaN in a row",
    "nan-ignoring-min": "no case has NaN in a row",
    "overrun-by-one": "it touches memory one past the end where no check sees it: a read whose value goes only "
                      "into results that are never stored (the NaN of an input's guard goes nowhere), or a write "
                      "no guard follows",
    "bound-flip": "no case has sizes where the changed comparison decides",
    "range-tail": "no case has a reduction length k with k % BK == 1 (the only tail this drops)",
    "pow2-tail": "no case has a row length of 2^j + 1 (the only length this block misses)",
    "cdiv-floor": "every case's size is a multiple of the block (no tail block)",
    "stride-swap": SWAPPED, "index-swap": SWAPPED, "shape-index-swap": SWAPPED, "shape-unpack-swap": SWAPPED,
    "broadcast-swap": SWAPPED, "dot-swap": SWAPPED, "program-id-swap": SWAPPED, "last-axis-to-first": SWAPPED,
    "half-accumulation": "the rounding of a half-precision accumulator stays within tolerance at these sizes",
    "bfloat16-accumulation": "the rounding of a bfloat16 accumulator stays within tolerance at these sizes",
    "float32-to-float16": "rounding to half (relative error <= 2^-11, about 4.9e-4) stays inside the float32 "
                          "tolerance on every value half represents; only values beyond its range (|x| > 65504, "
                          "or below about 6e-5 where half loses precision) or a difference of close values shows it",
    "bound-minus-one": "no case has a size where one less in this bound changes what is touched",
    "bfloat16-accumulator": "bfloat16 rounding stays within tolerance at these sizes",
    "tf32-dot": "the interpreter computes tl.dot in float32 whatever input_precision says",
    "eps-outside-sqrt": EPS,
}


def why(mutant: Mutant, result: dict[str, Any]) -> str:
    """A likely reason the mutant survives, with the largest error it showed."""
    text = mutant.after.lower()
    if "eps" in text and (mutant.rule in ("literal", "attribute-scaled") or mutant.rule.startswith("drop")):
        hint = EPS
    elif mutant.rule == "drop '-'" and "exp(" in text:
        hint = "subtracting the row max only matters when exp overflows; no case has inputs that large"
    else:
        hint = HINTS.get(mutant.rule, "the change moves the result by less than the tolerance on these inputs")
    stressed = result.get("stress") or {}
    differs = stressed.get("differs") or []
    if differs:
        hint += f"; stress sets that tell it from the unmutated kernel: {', '.join(differs[:4])}" + \
            (f" and {len(differs) - 4} more" if len(differs) > 4 else "")
    largest = stressed.get("largest")
    if largest:
        hint += (f" (there {largest['n_mismatch']} of {largest['n_elements']} elements fail, largest error "
                 f"{largest['max_abs_error']:.3g} on {largest['set']!r}, atol {largest['atol']:g}, rtol "
                 f"{largest['rtol']:g})")
    worst = result.get("worst") or {}
    if worst:
        hint += (f" (on the task's cases: largest error {worst['max_abs_error']:.3g} in case {worst['case']!r}, "
                 f"atol {worst['atol']:g}, rtol {worst['rtol']:g})")
    return "likely: " + hint


def equivalence(result: dict[str, Any]) -> str:
    """Why a mutant called equivalent is: what the stress sets inside the contract showed, and (by contract)
    where it differs outside the contract."""
    stressed = result.get("stress") or {}
    within = stressed.get("within") or []
    text = (f"identical values on all {stressed.get('same', 0)} stress sets inside the contract" if not within else
            f"within the task's tolerance on all {stressed.get('same', 0) + len(within)} stress sets inside the "
            f"contract, values differ on {len(within)} ({', '.join(within[:3])}{' ...' if len(within) > 3 else ''})")
    if not result.get("identical_on_cases", True):
        text += "; not bit-identical on the task's own cases"
    outside = stressed.get("outside") or {}
    if outside:
        sets = list(outside)
        text = (f"differs only outside the task's contract, on {', '.join(sets[:3])}"
                f"{f' and {len(sets) - 3} more' if len(sets) > 3 else ''}: {'; '.join(dict.fromkeys(outside.values()))}"
                f"; {text}")
    return text


def outcome(mutant_result: dict[str, Any], backend: str, rule: str) -> str:
    """The mutant's outcome (module docstring)."""
    if not mutant_result["compiled"] or (backend == "triton" and mutant_result.get("status") == "compile_error"):
        return "build-failed"
    if not mutant_result["passed"]:
        return "killed"
    # An overrun leaves the compared outputs alone and still writes or reads past the end: not equivalent.
    if rule == "overrun-by-one":
        return "survived"
    stressed = mutant_result.get("stress") or {}
    inside = stressed.get("same", 0) + len(stressed.get("within") or [])
    if stressed.get("differs") or not inside:
        return "survived"
    return "equivalent-by-contract" if stressed.get("outside") else "equivalent"


def run_jobs(jobs: list[dict[str, Any]], workers: int, label: str) -> dict[str, dict[str, Any]]:
    """Every job's result by key, in a pool of `workers` processes (in this process when workers is 1)."""
    results: dict[str, dict[str, Any]] = {}
    with Progress(transient=True, console=Console(stderr=True)) as progress:
        bar = progress.add_task(label, total=len(jobs))
        if workers <= 1:
            for job in jobs:
                results[job["key"]] = judge(job)
                progress.advance(bar)
            return results
        context = multiprocessing.get_context("spawn")  # torch and the sandboxes are not fork-safe
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for future in as_completed([pool.submit(judge, job) for job in jobs]):
                result = future.result()
                results[result["key"]] = result
                progress.advance(bar)
    return results


def score(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(row["outcome"] for row in rows)
    judged = counts["killed"] + counts["survived"]
    return {**{o: counts[o] for o in OUTCOMES}, "mutants": sum(counts.values()),
            "score": counts["killed"] / judged if judged else None}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for backend in sorted({r["backend"] for r in rows}):
        mine = [r for r in rows if r["backend"] == backend]
        summary[backend] = {
            "overall": score(mine),
            "by_class": {c: score(r for r in mine if r["cls"] == c) for c in CLASSES if any(r["cls"] == c for r in mine)},
            "by_kernel": {k: score(r for r in mine if r["kernel"] == k) for k in dict.fromkeys(r["kernel"] for r in mine)},
        }
    return summary


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def print_report(summary: dict[str, Any], rows: list[dict[str, Any]], refs: dict[str, dict[str, Any]]) -> None:
    console = Console()
    if not console.is_terminal:  # a log or a pipe: room for whole column titles and kernel names
        console = Console(width=160)
    for backend, parts in summary.items():
        for title, groups in (("class", parts["by_class"]), ("kernel", parts["by_kernel"])):
            table = Table(title=f"{backend}: mutation score by {title}")
            for column in (title, "mutants", *OUTCOMES, "score"):
                table.add_column(TITLES.get(column, column), justify="left" if column == title else "right")
            for name, s in [*groups.items(), ("overall", parts["overall"])]:
                table.add_row(name, str(s["mutants"]), *(str(s[o]) for o in OUTCOMES), _percent(s["score"]),
                              end_section=name == list(groups)[-1])
            console.print(table)
    broken = {name: ref for name, ref in refs.items() if not ref.get("passed")}
    for name, ref in broken.items():
        console.print(f"[red]reference {name} fails its own task ({ref.get('status')}: {ref.get('message')}); "
                      "its mutants were not judged[/red]")
    for title, kind in (("survivors", "survived"), ("likely equivalent (counted neither way)", "equivalent"),
                        ("equivalent outside the task's contract (counted neither way)", "equivalent-by-contract")):
        chosen = [r for r in rows if r["outcome"] == kind]
        console.print(f"\n[bold]{title}: {len(chosen)}[/bold]")
        for r in chosen:
            console.print(f"{r['kernel']}:{r['line']} {r['cls']}/{r['rule']}{'*' if r['hand_written'] else ''}: "
                          f"{escape(r['before'])}  ->  {escape(r['after'])}", soft_wrap=True)
            if r["why"]:
                console.print(f"    {escape(r['why'])}", soft_wrap=True)
    console.print("* hand-written mutant")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("cpu", "triton"), action="append", help="repeatable; default both")
    parser.add_argument("--cls", choices=CLASSES, action="append", help="mutant class (repeatable); default all")
    parser.add_argument("--task", action="append", help="task id or reference name (repeatable); default all")
    parser.add_argument("--limit", type=int, default=0, help="at most this many mutants in all (evenly spread)")
    parser.add_argument("--per-rule", type=int, default=3, help="at most this many mutants of a rule per kernel")
    parser.add_argument("--all", action="store_true",
                        help="judge every mutant (no --per-rule cap, no skipping of repeats across kernels)")
    parser.add_argument("--no-tests", action="store_true", help="only the shipped examples, not the tests' kernels")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    parser.add_argument("--seed", type=int, default=20260)
    parser.add_argument("--json", type=Path, help="write the full record here")
    parser.add_argument("--list", action="store_true", help="list the selected mutants and stop")
    args = parser.parse_args()

    started = time.perf_counter()
    digest = tasks_digest()
    repeats = 0
    backends = set(args.backend or ("cpu", "triton"))
    chosen_refs = [r for r in references(include_tests=not args.no_tests) if r.backend in backends
                   and (not args.task or r.task_id in args.task or r.name in args.task)]
    mutants: list[tuple[Reference, Mutant]] = []
    for ref in chosen_refs:
        made = [m for m in mutants_of(ref.source, ref.lang, ref.name, ref.file_name)
                if not args.cls or m.cls in args.cls]
        mutants += [(ref, m) for m in select(made, 0 if args.all else args.per_rule, 0)]
    if not args.all:  # the same edit of the same line in another kernel of the backend is judged once
        seen: set[tuple[str, str, str, str]] = set()
        kept = []
        for ref, m in mutants:
            if (ref.backend, m.rule, m.before, m.after) not in seen:
                seen.add((ref.backend, m.rule, m.before, m.after))
                kept.append((ref, m))
        repeats, mutants = len(mutants) - len(kept), kept
    if args.limit:
        mutants = evenly(mutants, args.limit)
    if args.list:
        for ref, m in mutants:
            print(f"{m.cls:11} {m.rule:22} {ref.origin}:{m.line}  {m.before}  ->  {m.after}")
        return
    threads = max(1, (os.cpu_count() or 1) // max(1, args.jobs))
    base = {"threads": threads, "seed": args.seed}
    needed = {ref.name: ref for ref, _ in mutants}
    baseline = run_jobs([{**base, "key": ref.name, "backend": ref.backend, "suite": ref.suite,
                          "task_id": ref.task_id, "source": ref.source} for ref in needed.values()],
                        args.jobs, "references")
    runnable = [(ref, m) for ref, m in mutants if baseline[ref.name].get("passed")]
    results = run_jobs([{**base, "key": m.id, "backend": ref.backend, "suite": ref.suite, "task_id": ref.task_id,
                         "source": m.source, "original": ref.source} for ref, m in runnable], args.jobs, f"{len(runnable)} mutants")
    rows = []
    for ref, m in runnable:
        result = results[m.id]
        if result.get("passed"):
            result["identical_on_cases"] = result.get("fingerprint") == baseline[ref.name].get("fingerprint")
        row = {**{k: v for k, v in asdict(m).items() if k != "source"}, "id": m.id, "backend": ref.backend,
               "task": ref.task_id, "origin": ref.origin, "outcome": outcome(result, ref.backend, m.rule),
               "result": {k: v for k, v in result.items() if k != "fingerprint"}}
        row["why"] = why(m, result) if row["outcome"] == "survived" else \
            equivalence(result) if row["outcome"].startswith("equivalent") else ""
        rows.append(row)
    summary = summarise(rows)
    print_report(summary, rows, baseline)
    changed = tasks_digest() != digest
    if changed:
        Console().print("[red]the task definitions (src/kernelsage/tasks) changed during this run: mutants judged "
                        "after the change met other cases than the references; run it again[/red]")
    seconds = time.perf_counter() - started
    load = os.getloadavg()
    Console().print(f"{len(rows)} mutants of {len(needed)} kernels judged ({repeats} repeats of a mutant already "
                    f"judged on another kernel skipped) in {seconds:.0f} s with {args.jobs} "
                    f"workers ({threads} thread(s) each) on {os.cpu_count()} cores; load average {load[0]:.1f}")
    if args.json:
        record = {"settings": {**vars(args), "json": str(args.json), "standard_trials": STANDARD_TRIALS,
                               "extra_trials": EXTRA_TRIALS},
                  "seconds": seconds, "repeats_skipped": repeats,
                  "tasks_digest": digest, "tasks_changed_during_run": changed, "cores": os.cpu_count(), "load_average": load,
                  "references": {name: {"backend": needed[name].backend, "task": needed[name].task_id,
                                        "origin": needed[name].origin,
                                        **{k: v for k, v in r.items() if k != "fingerprint"}}
                                 for name, r in baseline.items()},
                  "summary": summary, "mutants": rows}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
