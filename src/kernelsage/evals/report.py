"""The comparison report: a Markdown file and a self-contained HTML file with the same tables and plots."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelsage.evals.audit import audit_records
from kernelsage.evals.metrics import (
    ComparisonRow,
    Metrics,
    TimeSpread,
    attempt_times,
    compare,
    deduplicate,
    p_key,
)
from kernelsage.evals.records import EpisodeRecord, HotRule, is_harness_error
from kernelsage.evals.verdict import produced_code, round_statuses

COMPARISON_HEADERS = [
    "Policy", "Operators", "ER (solved)", "CR (compiled)", "Acc (correct)", "Fast1.0 (beat PyTorch)",
    "S_self median", "Speedup median", "Speedup geomean", "fast_1.0",
]
OPERATOR_HEADERS = ["Operator", "Level", "Rounds (status of each)", "T_first", "T_best", "T_ref", "Best kernel"]
DEFINITIONS = [
    "ER (execution rate): operators with at least one correct kernel / operators.",
    "CR (compilation rate): candidates that compiled / candidates generated. Acc: correct candidates / "
    "candidates generated.",
    "Fast1.0: solved operators whose best kernel beats the PyTorch reference (speedup > 1) / solved operators.",
    "S_self: T_first / T_best over solved operators (how much faster the best kernel is than the episode's "
    "first correct one). Speedup: T_reference / T_best over solved operators with measured latencies, where "
    "above 1x means faster than the PyTorch reference; 1.00x means the measured noise hides any difference.",
    "Medians of speedups are taken on a log scale (with an even count, the geometric mean of the middle two); "
    "n is the number of operators behind a statistic, followed by the smallest and largest value.",
    "Times (T_first: the first correct kernel, T_best: the best one, T_ref: the PyTorch reference in the best "
    "kernel's run) are medians per call with the ~95% interval of the median in brackets.",
    "fast_p: correct operators with speedup > p / all operators.",
    "A task run twice in one policy's stream counts once, by its last record.",
    "Rounds by status: every round, by the backend's verdict or by why it produced nothing to evaluate "
    "(parse_error, truncated, adoption_unresolved, model_error; see graph.records.ROUND_FAILURES); "
    "failed episodes stopped before their budget (the reason is in each record's failure).",
    "Adoption audit: for each item the model declared adopted in an episode, whether the code of a round that "
    "declared it shows a new cue of the item (a name, pragma, code fragment or the direction of its diff); "
    "agreement = evidenced / declared. ATU credited 'declared' (the method) or 'audited' (evidenced only).",
]
# Statuses of rounds that never reached the backend, always shown so that zero is visible too.
ROUND_FAILURE_COLUMNS = ("parse_error", "truncated", "adoption_unresolved", "model_error")

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:14px}"
    "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    "th:first-child,td:first-child{text-align:left}"
    "th{background:#f2f2f2}.note{background:#fff7d6;border-left:4px solid #e0b000;padding:6px 10px}"
    "img{max-width:100%;border:1px solid #eee}"
)


@dataclass(frozen=True)
class ReportPaths:
    markdown: Path
    html: Path
    plots: list[Path]


@dataclass(frozen=True)
class _Table:
    heading: str
    headers: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class _List:
    heading: str
    items: list[str]
    empty: str = "none"


def speedup_words(speedup: float | None, reference: str = "the PyTorch reference") -> str:
    """A speedup (T_reference / T_kernel) in words: "1.15x faster than ...", "2.00x slower than ..."."""
    if speedup is None or speedup <= 0:
        return "not measured"
    if speedup == 1.0:
        return f"as fast as {reference} (within the measured noise)"
    if speedup > 1.0:
        return f"{speedup:.2f}x faster than {reference}"
    return f"{1 / speedup:.2f}x slower than {reference}"


def interval_words(speedup: TimeSpread, reference: str = "the PyTorch reference") -> str:
    """A median speedup with its interval in words; "about as fast" when the interval holds 1."""
    bounds = f"(interval {speedup.low:.2f}x to {speedup.high:.2f}x)"
    if speedup.low <= 1.0 <= speedup.high:
        return f"about as fast as {reference}: {speedup.median:.2f}x {bounds}"
    return f"{speedup_words(speedup.median, reference)} {bounds}"


def format_seconds(seconds: float) -> str:
    """A time per call with a unit a reader takes in at a glance."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_time(spread: TimeSpread | None) -> str:
    if spread is None:
        return "-"
    return f"{format_seconds(spread.median)} [{format_seconds(spread.low)}, {format_seconds(spread.high)}]"


def replay_note(records_by_policy: Mapping[str, Sequence[EpisodeRecord]]) -> str | None:
    """The banner of a replayed run, derived from its records (each says which model answered)."""
    models = sorted({r.model for records in records_by_policy.values() for r in records
                     if r.model.startswith("replay:")})
    if not models:
        return None
    return (f"The model's answers in this run were replayed from a recording ({', '.join(models)}): no model "
            "was called. Compilation, verification, profiling and the memory updates are real.")


def comparison_table(
    rows: Sequence[ComparisonRow], level: int | None = None
) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of the side-by-side table, overall or for one level (absent policies left out)."""
    cells = []
    for row in rows:
        metrics = row.summary.overall if level is None else row.summary.by_level.get(level)
        if metrics is not None:
            cells.append([row.policy, *_comparison_cells(metrics)])
    return list(COMPARISON_HEADERS), cells


def write_report(
    records_by_policy: Mapping[str, Sequence[EpisodeRecord]],
    out_dir: Path,
    *,
    title: str,
    notes: Sequence[str] = (),
    hot_rules: Mapping[str, Sequence[HotRule]] | None = None,
) -> ReportPaths:
    """Write report.md, report.html and plots/*.png into `out_dir` (created if needed).

    A replayed run (a record's model is `replay:...`) always gets the replay banner; `hot_rules` (the
    run's run.json) adds each policy's resident rules with their provenance."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = compare(records_by_policy)
    tables: list[_Table | _List] = [*_tables(rows), *_audit_table(records_by_policy),
                                    *_operator_tables(records_by_policy)]
    tables += _hot_rule_lists(records_by_policy, hot_rules)
    replayed = replay_note(records_by_policy)
    if replayed and not any("replayed from a recording" in note for note in notes):
        notes = [replayed, *notes]
    notes = [*notes, *_consistency_notes(rows), *_no_code_notes(records_by_policy)]
    # matplotlib loads here, when plots are drawn: commands that only read records or print a table never pay for it.
    from kernelsage.evals.report_plots import plot_all

    plots = plot_all(records_by_policy, out_dir / "plots")

    markdown_path = out_dir / "report.md"
    markdown_path.write_text(_markdown(title, notes, tables, plots, out_dir), encoding="utf-8")
    html_path = out_dir / "report.html"
    html_path.write_text(_html(title, notes, tables, plots), encoding="utf-8")
    return ReportPaths(markdown_path, html_path, [path for _, path in plots])


def _comparison_cells(metrics: Metrics) -> list[str]:
    fast_1 = metrics.fast_p.get(1.0)
    return [
        str(metrics.operators), str(metrics.er), str(metrics.cr), str(metrics.acc), str(metrics.fast1),
        metrics.s_self_median.format("x"), metrics.speedup_median.format("x"),
        metrics.speedup_geomean.format("x"), "n/a" if fast_1 is None else str(fast_1),
    ]


def _tables(rows: Sequence[ComparisonRow]) -> list[_Table]:
    tables = [_Table("Comparison (all levels)", *comparison_table(rows))]
    levels = sorted({level for row in rows for level in row.summary.by_level})
    tables += [_Table(f"Level {level}", *comparison_table(rows, level)) for level in levels]

    thresholds = sorted({p for row in rows for p in row.summary.overall.fast_p})
    tables.append(_Table(
        "fast_p (correct and speedup > p, over all operators)",
        ["Policy", *(f"fast_{p_key(p)}" for p in thresholds)],
        [[row.policy, *(str(row.summary.overall.fast_p.get(p, "n/a")) for p in thresholds)] for row in rows],
    ))
    tables.append(_Table(
        "Search and memory",
        ["Policy", "Episodes", "Superseded records", "Mean round of first correct", "Adoption rate",
         "Mean terminal score"],
        [[row.policy, str(row.summary.episodes), str(row.summary.superseded),
          row.summary.overall.mean_first_correct_round.format(digits=1), str(row.summary.overall.adoption),
          row.summary.overall.mean_terminal_score.format(digits=3)] for row in rows],
    ))
    tables.append(_status_table(rows))
    return tables


def _audit_table(records_by_policy: Mapping[str, Sequence[EpisodeRecord]]) -> list[_Table]:
    """Per policy: adoptions declared, those the code showed, the agreement rate (none without audits)."""
    audits = [a for a in audit_records(records_by_policy).values() if a.declared or a.unaudited]
    if not audits:
        return []
    return [_Table(
        "Adoption audit (declared adoptions the written code shows; kernelsage memory audit --run ID per item)",
        ["Policy", "ATU credited", "Declared adoptions", "Evidenced in the code", "Agreement", "Episodes not audited"],
        [[a.policy, ", ".join(sorted(a.modes)) or "-", str(a.declared), str(a.evidenced), str(a.agreement),
          str(a.unaudited)] for a in audits],
    )]


def _operator_tables(records_by_policy: Mapping[str, Sequence[EpisodeRecord]]) -> list[_Table]:
    """Per policy, one row per operator: every round's status, the times with their spread, the result."""
    tables = []
    for policy, records in records_by_policy.items():
        rows = []
        for record in deduplicate(records):
            times = attempt_times(record)
            rounds = ", ".join(f"r{a.round} {a.status}" for a in record.attempts) or "-"
            result = speedup_words(record.speedup) if record.solved else "not solved"
            if record.failure:
                result += f" (stopped: {record.failure})"
            recorded = (record.t_first, record.t_best, record.t_reference)
            cells = [format_time(spread) if spread is not None else
                     f"{format_seconds(mean)} (mean; no spread recorded)" if mean else "-"
                     for spread, mean in zip((times["first"], times["best"], times["reference"]), recorded,
                                             strict=True)]
            rows.append([record.task_id, "-" if record.level is None else str(record.level), rounds, *cells,
                         result])
        tables.append(_Table(f"Operators ({policy})", list(OPERATOR_HEADERS), rows))
    return tables


def _hot_rule_lists(records_by_policy: Mapping[str, Sequence[EpisodeRecord]],
                    hot_rules: Mapping[str, Sequence[HotRule]] | None) -> list[_List]:
    if hot_rules is None:
        return []
    lists = []
    for policy in records_by_policy:
        rules = hot_rules.get(policy, [])
        lists.append(_List(f"Hot rules at the end of the run ({policy})", [_rule_text(r) for r in rules],
                           empty="none: no item passed the gate into hot memory"))
    return lists


def _rule_text(rule: HotRule) -> str:
    """A rule, then where it came from: its source, the episode and operator, who adopted it."""
    origin = f"from {rule.kind or 'item'} {rule.id}"
    if rule.source_text and rule.source_text != rule.text:
        origin += f" (\"{' '.join(rule.source_text.split())}\")"
    if rule.source_episode:
        origin += f", written in episode {rule.source_episode}"
    elif rule.operator:
        origin += f", from operator {rule.operator}"
    adopted = f"adopted {rule.n_ado} times on {', '.join(rule.adopting_ops) or 'no operator'}"
    return (f"{' '.join(rule.text.split())} — {origin}; {adopted}; utility {rule.utility:+.3f}; "
            f"{rule.tokens} tokens")


def _status_table(rows: Sequence[ComparisonRow]) -> _Table:
    """Rounds by status per policy: backend verdicts (ok first) and then the rounds that failed earlier."""
    seen = {status for row in rows for status in row.summary.overall.round_statuses}
    verdicts = sorted(seen - set(ROUND_FAILURE_COLUMNS), key=lambda status: (status != "ok", status))
    columns = [*verdicts, *ROUND_FAILURE_COLUMNS]
    return _Table(
        "Rounds by status",
        ["Policy", "Rounds", *columns, "Failed episodes"],
        [[row.policy, str(row.summary.overall.rounds),
          *(str(row.summary.overall.round_statuses.get(status, 0)) for status in columns),
          str(row.summary.overall.failed_episodes)] for row in rows],
    )


def _consistency_notes(rows: Sequence[ComparisonRow]) -> list[str]:
    # A comparison is only fair on the same operators; say so plainly when it is not.
    task_sets = {row.task_ids for row in rows}
    if len(task_sets) <= 1:
        return []
    return ["Warning: the policies did not run the same operators; "
            + ", ".join(f"{row.policy}: {len(row.task_ids)}" for row in rows) + "."]


def _no_code_notes(records_by_policy: Mapping[str, Sequence[EpisodeRecord]]) -> list[str]:
    # With no candidate, CR, Acc and Fast1.0 read "n/a (0/0)": say plainly that nothing was written, and why.
    notes = []
    for policy, records in records_by_policy.items():
        runnable = [r for r in records if not is_harness_error(r)]
        if runnable and not produced_code(runnable):
            notes.append(f"Policy {policy}: no code was produced ({round_statuses(runnable)}), so CR, Acc and "
                         "Fast1.0 are undefined.")
    return notes


def _markdown(title: str, notes: Sequence[str], tables: Sequence[_Table | _List],
              plots: Sequence[tuple[str, Path]], out_dir: Path) -> str:
    lines = [f"# {title}", ""]
    for note in notes:
        lines += [f"> {note}", ""]
    for table in tables:
        if isinstance(table, _List):
            lines += [f"## {table.heading}", ""]
            lines += [f"- {item}" for item in table.items] or [table.empty]
            lines.append("")
            continue
        lines += [f"## {table.heading}", "", _md_row(table.headers), _md_row(["---"] * len(table.headers))]
        lines += [_md_row(row) for row in table.rows]
        lines.append("")
    lines += ["## Plots", ""]
    for caption, path in plots:
        lines += [f"![{caption}]({path.relative_to(out_dir).as_posix()})", ""]
    lines += ["## Definitions", ""]
    lines += [f"- {definition}" for definition in DEFINITIONS]
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    # A pipe inside a cell (e.g. in a policy name) would split the column.
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _html(title: str, notes: Sequence[str], tables: Sequence[_Table | _List],
          plots: Sequence[tuple[str, Path]]) -> str:
    esc = html.escape
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f"<title>{esc(title)}</title>", f"<style>{_CSS}</style>", "</head>",
        "<body>", f"<h1>{esc(title)}</h1>",
    ]
    parts += [f'<p class="note">{esc(note)}</p>' for note in notes]
    for table in tables:
        if isinstance(table, _List):
            items = [f"<li>{esc(item)}</li>" for item in table.items]
            parts += [f"<h2>{esc(table.heading)}</h2>",
                      *(["<ul>", *items, "</ul>"] if items else [f"<p>{esc(table.empty)}</p>"])]
            continue
        parts += [f"<h2>{esc(table.heading)}</h2>", "<table>",
                  "<tr>" + "".join(f"<th>{esc(cell)}</th>" for cell in table.headers) + "</tr>"]
        parts += ["<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>" for row in table.rows]
        parts.append("</table>")
    parts.append("<h2>Plots</h2>")
    for caption, path in plots:
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        image = f'<img alt="{esc(caption)}" src="data:image/png;base64,{encoded}">'
        parts += [f"<h3>{esc(caption)}</h3>", image]
    parts += ["<h2>Definitions</h2>", "<ul>", *(f"<li>{esc(d)}</li>" for d in DEFINITIONS), "</ul>"]
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"
