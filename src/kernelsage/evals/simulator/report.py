"""The simulation report: Markdown and self-contained HTML in the stream report's layout (evals.report)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelsage.evals.report import ReportPaths, _html, _markdown, _Table
from kernelsage.evals.simulator.plots import plot_study
from kernelsage.evals.simulator.study import Study, Sweep

COLUMNS = (("er", "ER", True), ("level3_er", "Level-3 ER", True), ("fast1", "Fast1.0", True),
           ("s_self", "S_self median", False), ("s_self_mean", "S_self mean", False),
           ("credit_accuracy", "Credit accuracy", False), ("hot_precision", "Hot precision", True),
           ("memory_tokens", "Memory tokens / episode", False), ("harmful_shown", "Harmful shown (2nd half)", True),
           ("harmful_demoted", "Harmful demoted", True),
           ("exposures_to_demote", "Exposures to demote", False), ("helpful_demoted", "Helpful demoted", True),
           ("items", "Items at end", False))
NOTES = (
    "Simulated: the generator is a stochastic stand-in, not a language model; the memory, its policies, commit "
    "and consolidation are the real ones, on the real database. The model and its assumptions: docs/simulator.md.",
    "Each cell: mean over seeds [95% Student-t interval]; n/a where a measure is undefined (e.g. no hot memory).",
    "Credit accuracy: Spearman rank correlation of each item's learned utility (Q for value) with its true value "
    "where it was shown, over items shown at least 3 times. Hot precision: share of resident rules at the end "
    "whose true value over the stream's operators is positive.",
    "Harmful shown: share of the items shown in the second half of the stream that were harmful (true value "
    "below -0.05) for the operator and stage they were shown for. Harmful / helpful demoted: share of items "
    "of true value below -0.05 / above 0.05 whose stored utility fell "
    "below 0; exposures to demote: median episodes that showed a harmful item until it did.",
)


def cell(summary: dict[str, Any], percent: bool) -> str:
    """`mean [low, high]`, in percent for shares; `mean (1 seed)` where one value gives no interval."""
    if summary["mean"] is None:
        return "n/a"
    scale, unit = (100.0, "%") if percent else (1.0, "")
    digits = 1 if percent else 2 if abs(summary["mean"]) < 100 else 0
    if summary["low"] is None:
        return f"{scale * summary['mean']:.{digits}f}{unit} (1 seed)"
    mean, low, high = (scale * summary[k] for k in ("mean", "low", "high"))
    return f"{mean:.{digits}f}{unit} [{low:.{digits}f}, {high:.{digits}f}]"


def study_tables(study: Study) -> list[_Table]:
    tables = []
    for order in study.spec.orders:
        summary = study.summary(order)
        rows = [[policy, *(cell(summary[policy][key], percent) for key, _, percent in COLUMNS)]
                for policy in study.spec.policies]
        tables.append(_Table(f"Order {order} ({study.spec.seeds} seeds x {study.spec.episodes} episodes)",
                             ["Policy", *(label for _, label, _ in COLUMNS)], rows))
    return tables


def sweep_table(sweep: Sweep) -> _Table:
    data = sweep.to_json()["policies"]
    rows = [[policy, f"{value:g}", cell(s["er"], True), cell(s["credit_accuracy"], False),
             cell(s["hot_precision"], True), cell(s["fast1"], True)]
            for policy, summaries in data.items() for value, s in zip(sweep.values, summaries, strict=True)]
    return _Table(f"Sweep of {sweep.name} (order {sweep.order})",
                  ["Policy", sweep.name, "ER", "Credit accuracy", "Hot precision", "Fast1.0"], rows)


def write_simulation_report(study: Study, sweeps: Sequence[Sweep], out_dir: Path, *, title: str) -> ReportPaths:
    """Write report.md, report.html and plots/*.png of a simulation into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = [*study_tables(study), *(sweep_table(s) for s in sweeps)]
    notes = [*NOTES, *(f"Invariant broken: {p}" for p in study.problems)]
    if study.spec.warm_start is not None:
        notes.insert(1, f"Warm start: every policy starts from the knowledge pack and the same mined lessons (at most "
                        f"{study.spec.warm_start.lessons} per seed; assumptions: docs/simulator.md, 'Warm start').")
    plots = plot_study(study, sweeps, out_dir / "plots")
    markdown = out_dir / "report.md"
    markdown.write_text(_markdown(title, notes, tables, plots, out_dir), encoding="utf-8")
    html = out_dir / "report.html"
    html.write_text(_html(title, notes, tables, plots), encoding="utf-8")
    return ReportPaths(markdown, html, [path for _, path in plots])
