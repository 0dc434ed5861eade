"""Benchmark of the adoption audit on the labelled set of declared adoptions (tests/graph/audit_cases/*.yaml).

Each case is an item, the episode's previous candidate, the candidate that declared the item adopted, and
whether that code really follows the item. The audit checks every case as the curator does (both candidates
read through the backend's preprocessor and parser, then `evidence`). Cases the set marks expected-to-fail
count like the others. Not a test. Prints a table per backend and the cases the audit gets wrong, then as its
last line one JSON object:
  false_accept_rate   false declarations the audit evidenced / false declarations   (goal <= 5 %)
  false_reject_rate   true adoptions the audit did not evidence / true adoptions    (goal <= 10 %)
  check_p50_ms, check_p95_ms   wall time of one check (read both candidates, decide), over all cases x repeats
The text-search audit this replaced (issue 31) measured 76.3 % false accepts (29/38) and 40.5 % false rejects
(15/37) on the same set, with the backend's contract as its baseline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from kernelsage.graph.adoption_audit import EMPTY, Code, evidence, item_cues, preprocessor_for

CASES = Path(__file__).resolve().parents[1] / "tests" / "graph" / "audit_cases"


def load_cases() -> list[dict]:
    """The labelled cases, each with its backend (the file it is in)."""
    return [{**case, "backend": path.stem} for path in sorted(CASES.glob("*.yaml"))
            for case in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]]


def check(case: dict) -> tuple[bool, str, float]:
    """The audit's verdict on one case, its reason, and the seconds the check took."""
    name = "kernel.py" if case["backend"] == "triton" else "kernel.cpp"
    preprocessor = preprocessor_for(case["backend"])
    cues = item_cues([case["item"]], case.get("example"))
    started = time.perf_counter()
    current = Code.of({name: case["current"]}, preprocessor=preprocessor)
    previous = Code.of({name: case["previous"]}, preprocessor=preprocessor) if case["previous"] else EMPTY
    evidenced, _, reason = evidence(cues, current, previous)
    return evidenced, reason, time.perf_counter() - started


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="checks per case, for the timing figures")
    args = parser.parse_args()
    cases = load_cases()
    seconds: list[float] = []
    verdicts: dict[str, tuple[bool, str]] = {}
    for case in cases:
        for _ in range(max(1, args.repeat)):
            evidenced, reason, took = check(case)
            seconds.append(took)
        verdicts[case["id"]] = (evidenced, reason)

    table = Table(title="Adoption audit on the labelled set")
    for column in ("backend", "false declarations", "false accepts", "true adoptions", "false rejects"):
        table.add_column(column)
    for backend in [*sorted({c["backend"] for c in cases}), "all"]:
        chosen = [c for c in cases if backend in ("all", c["backend"])]
        false = [c for c in chosen if not c["label"]]
        true = [c for c in chosen if c["label"]]
        accepts = sum(verdicts[c["id"]][0] for c in false)
        rejects = sum(not verdicts[c["id"]][0] for c in true)
        table.add_row(backend, str(len(false)), f"{accepts} ({accepts / max(1, len(false)):.1%})", str(len(true)),
                      f"{rejects} ({rejects / max(1, len(true)):.1%})")
    console = Console()
    console.print(table)
    for case in cases:
        evidenced, reason = verdicts[case["id"]]
        if evidenced != case["label"]:
            expected = f" (expected: {case['xfail']})" if case.get("xfail") else ""
            console.print(f"wrong: {case['id']}: label {case['label']}, audit: {reason}{expected}", highlight=False)

    false = [c for c in cases if not c["label"]]
    true = [c for c in cases if c["label"]]
    summary = {
        "cases": len(cases), "false_declarations": len(false), "true_adoptions": len(true),
        "false_accept_rate": round(sum(verdicts[c["id"]][0] for c in false) / len(false), 4),
        "false_reject_rate": round(sum(not verdicts[c["id"]][0] for c in true) / len(true), 4),
        "check_p50_ms": round(1000 * statistics.median(seconds), 1),
        "check_p95_ms": round(1000 * percentile(seconds, 0.95), 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
