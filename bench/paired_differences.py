"""Paired differences between two memory policies, from the JSON `kernelsage simulate --json` printed.

Within a seed both policies meet the same world and stream, so a measure is compared seed by seed: the
difference in each seed where both define it, then its mean and 95% Student-t interval over those seeds
(measures.interval). This is how the paired tables of docs/ablation.md are made:

  kernelsage simulate ... --json | tail -1 > study.json
  python bench/paired_differences.py study.json sage uniform

Shares (ER, Fast1.0, hot precision, ...) are printed in percentage points. Prints a table, then one JSON
object with every cell.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernelsage.evals.simulator.measures import SHARES, interval
from kernelsage.evals.simulator.report import cell

DEFAULT_MEASURES = ("er", "level3_er", "fast1", "s_self", "credit_accuracy", "hot_precision")


def paired(first: dict[str, Any], second: dict[str, Any], *, share: bool) -> dict[str, Any]:
    """first - second, seed by seed where both are defined, as an interval over those seeds (a difference
    of shares lies within [-1, 1])."""
    differences = [a - b if a is not None and b is not None else None
                   for a, b in zip(first["values"], second["values"], strict=True)]
    return interval(differences, (-1.0, 1.0) if share else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path, help="the JSON object `kernelsage simulate --json` printed last")
    parser.add_argument("first", help="policy whose figures come first (e.g. sage)")
    parser.add_argument("second", help="policy subtracted (e.g. uniform)")
    parser.add_argument("--measures", default=",".join(DEFAULT_MEASURES), help="comma-separated measure names")
    args = parser.parse_args()

    study = json.loads(args.study.read_text().strip().splitlines()[-1])
    measures = [m.strip() for m in args.measures.split(",") if m.strip()]
    table = Table(title=f"paired differences {args.first} - {args.second} (mean [95% interval] over seeds)")
    table.add_column("order")
    for measure in measures:
        table.add_column(measure)
    cells: dict[str, dict[str, Any]] = {}
    for order, figures in study["orders"].items():
        policies = figures["policies"]
        for policy in (args.first, args.second):
            if policy not in policies:
                raise SystemExit(f"policy {policy!r} is not in the study (it has {', '.join(policies)})")
        cells[order] = {m: paired(policies[args.first][m], policies[args.second][m], share=m in SHARES)
                        for m in measures}
        table.add_row(order, *(cell(cells[order][m], m in SHARES) for m in measures))
    Console().print(table)
    print(json.dumps(cells))


if __name__ == "__main__":
    main()
