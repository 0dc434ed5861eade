"""The Markdown and HTML reports: tables with counts, notes, five embedded plots, no crash on missing data."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from kernelsage.evals.records import group_by_policy, read_records
from kernelsage.evals.report import write_report

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "records" / "two_policies.jsonl"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REPLAY_NOTE = "Model responses are replayed from a recording."


@pytest.fixture(scope="module")
def records_by_policy():
    return group_by_policy(read_records(FIXTURE))


@pytest.fixture(scope="module")
def two_policy_report(records_by_policy, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("report")
    paths = write_report(records_by_policy, out_dir, title="Demo <stream> & co", notes=[REPLAY_NOTE])
    return out_dir, paths


def _embedded_pngs(html_text: str) -> list[bytes]:
    encoded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html_text)
    return [base64.b64decode(data) for data in encoded]


def test_both_reports_and_five_png_plots_are_written(two_policy_report):
    out_dir, paths = two_policy_report
    assert paths.markdown == out_dir / "report.md"
    assert paths.html == out_dir / "report.html"
    assert len(paths.plots) == 5
    for plot in paths.plots:
        assert plot.parent == out_dir / "plots"
        assert plot.read_bytes()[:8] == PNG_SIGNATURE


def test_the_html_report_is_self_contained_with_five_embedded_plots(two_policy_report):
    _, paths = two_policy_report
    text = paths.html.read_text(encoding="utf-8")
    images = _embedded_pngs(text)
    assert text.count("data:image/png;base64,") == len(images) == 5
    assert all(image[:8] == PNG_SIGNATURE for image in images)
    assert REPLAY_NOTE in text
    assert "Demo &lt;stream&gt; &amp; co" in text
    assert "<stream>" not in text
    for external in ('src="http', "<link", "<script", "url("):
        assert external not in text


def test_the_markdown_report_has_the_note_and_tables_with_counts(two_policy_report):
    _, paths = two_policy_report
    text = paths.markdown.read_text(encoding="utf-8")
    assert text.startswith("# Demo <stream> & co\n")
    assert text.index(REPLAY_NOTE) < text.index("## Comparison")
    # The fixture: sage solves 5 of 6 operators, 3 of its 5 solved ones beat the reference
    # (speedups 2, 1, 2.5, 1/3, 2); none solves 3 of 6, none of them faster than the reference.
    assert re.search(r"^\| sage \| 6 \| 83\.3% \(5/6\) \| .* \| 60\.0% \(3/5\) \|", text, re.MULTILINE)
    assert re.search(r"^\| none \| 6 \| 50\.0% \(3/6\) \| .* \| 0\.0% \(0/3\) \|", text, re.MULTILINE)
    assert "| 2.00x (n=5, 0.33x to 2.50x) |" in text  # sage's median speedup, with its range
    for level in (1, 2, 3):
        assert f"## Level {level}" in text
    # Level 3 for the no-memory policy: nothing solved, so Fast1.0 and the speedups are undefined.
    assert "| none | 2 | 0.0% (0/2) |" in text
    assert "n/a (0/0)" in text
    assert "![Cumulative ER along the stream](plots/cumulative_er.png)" in text


def test_the_tables_are_the_same_in_both_reports(two_policy_report):
    _, paths = two_policy_report
    markdown, html_text = paths.markdown.read_text(encoding="utf-8"), paths.html.read_text(encoding="utf-8")
    for cell in ("83.3% (5/6)", "60.0% (3/5)", "75.0% (9/12)", "fast_1.5"):
        assert cell in markdown
        assert f"<td>{cell}</td>" in html_text or f"<th>{cell}</th>" in html_text


def test_a_policy_without_memory_data_still_gets_every_plot(records_by_policy, tmp_path):
    paths = write_report({"none": records_by_policy["none"]}, tmp_path, title="No memory")
    assert len(_embedded_pngs(paths.html.read_text(encoding="utf-8"))) == 5
    assert all(plot.read_bytes()[:8] == PNG_SIGNATURE for plot in paths.plots)
    markdown = paths.markdown.read_text(encoding="utf-8")
    assert "| none | 6 | 0 | 2.0 (n=3) | n/a (0/0) | n/a (n=0) |" in markdown


def test_empty_runs_and_unequal_operator_sets_are_reported_not_fatal(records_by_policy, tmp_path):
    paths = write_report({"sage": records_by_policy["sage"][:2], "static": []}, tmp_path, title="Partial")
    markdown = paths.markdown.read_text(encoding="utf-8")
    assert "did not run the same operators; sage: 2, static: 0." in markdown
    assert "| static | 0 | n/a (0/0) |" in markdown
    assert len(_embedded_pngs(paths.html.read_text(encoding="utf-8"))) == 5


def test_the_text_is_deterministic(records_by_policy, tmp_path):
    first = write_report(records_by_policy, tmp_path / "one", title="T", notes=[REPLAY_NOTE])
    second = write_report(records_by_policy, tmp_path / "two", title="T", notes=[REPLAY_NOTE])
    assert first.markdown.read_text(encoding="utf-8") == second.markdown.read_text(encoding="utf-8")


def test_rounds_are_counted_by_status_per_policy(records_by_policy, tmp_path):
    from kernelsage.evals.metrics import summarize
    from kernelsage.graph.records import Attempt

    policy, records = next(iter(records_by_policy.items()))
    failed = records[0].model_copy(update={
        "attempts": [*records[0].attempts, Attempt(round=9, stage="draft", status="parse_error"),
                     Attempt(round=10, stage="draft", status="model_error", detail="gave up")],
        "failure": "model_error in 3 rounds in a row"})
    changed = {**records_by_policy, policy: [failed, *records[1:]]}
    overall = summarize(changed[policy]).overall
    before = summarize(records).overall
    assert overall.round_statuses["parse_error"] == before.round_statuses.get("parse_error", 0) + 1
    assert overall.round_statuses["model_error"] == before.round_statuses.get("model_error", 0) + 1
    assert overall.rounds == before.rounds + 2 and overall.failed_episodes == 1
    markdown = write_report(changed, tmp_path, title="statuses").markdown.read_text()
    table = markdown[markdown.index("Rounds by status"):]
    header = next(line for line in table.splitlines() if line.startswith("| Policy"))
    assert all(column in header for column in ("parse_error", "truncated", "adoption_unresolved", "model_error",
                                               "Failed episodes"))
    row = next(line for line in table.splitlines() if line.startswith(f"| {policy} "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert cells[columns.index("model_error")] == str(overall.round_statuses["model_error"])
    assert cells[columns.index("Failed episodes")] == "1"


# ---------------------------------------------------------------- the story of each operator


def _timing(median: float, spread: float = 0.1):
    from kernelsage.tools.results import Timing

    return Timing(mean=median, median=median, cv=spread, minimum=median * (1 - spread), warmup=5, reps=100,
                  ci_low=median * (1 - spread), ci_high=median * (1 + spread))


def _attempt(round_no: int, candidate: float, reference: float, status: str = "ok"):
    from kernelsage.graph.records import Attempt
    from kernelsage.tools.results import CompileResult, Evaluation, ProfileResult, Status

    if status != "ok":
        evaluation = Evaluation(status=Status(status), compile=CompileResult(ok=False, status=Status(status)))
        return Attempt(round=round_no, stage="draft", status=status, evaluation=evaluation)
    profile = ProfileResult(status=Status.OK, ok=True, candidate=_timing(candidate), reference=_timing(reference),
                            output_correct=True)
    evaluation = Evaluation(status=Status.OK, correct=True, latency=candidate, reference_latency=reference,
                            compile=CompileResult(ok=True, status=Status.OK), profile=profile)
    return Attempt(round=round_no, stage="draft" if round_no < 3 else "refine", status="ok", evaluation=evaluation)


def test_every_operator_gets_its_rounds_times_with_spread_and_result_in_words(records_by_policy, tmp_path):
    from kernelsage.graph.records import EpisodeOutcome

    attempts = [_attempt(1, 0, 0, "compile_error"), _attempt(2, 8e-3, 2e-3), _attempt(3, 1e-3, 2e-3)]
    outcome = EpisodeOutcome.of(task_id="l1_relu", episode_id="e", level=1, rounds=3, attempts=attempts)
    record = records_by_policy["sage"][0].model_copy(update={**dict(outcome), "attempts": attempts})
    markdown = write_report({"sage": [record]}, tmp_path, title="ops").markdown.read_text()
    table = markdown[markdown.index("## Operators (sage)"):]
    row = next(line for line in table.splitlines() if line.startswith("| l1_relu "))
    assert "r1 compile_error, r2 ok, r3 ok" in row
    assert "| 8 ms [7.2 ms, 8.8 ms] | 1 ms [900 us, 1.1 ms] | 2 ms [1.8 ms, 2.2 ms] |" in row
    assert row.rstrip(" |").endswith("2.00x faster than the PyTorch reference")


def test_speedups_are_said_in_words() -> None:
    from kernelsage.evals.metrics import TimeSpread
    from kernelsage.evals.report import interval_words, speedup_words

    assert speedup_words(1.15) == "1.15x faster than the PyTorch reference"
    assert speedup_words(0.5) == "2.00x slower than the PyTorch reference"
    assert speedup_words(1.0).startswith("as fast as the PyTorch reference")
    assert speedup_words(None) == "not measured"
    assert interval_words(TimeSpread(1.1, 0.9, 1.3), "PyTorch").startswith("about as fast as PyTorch: 1.10x")
    assert interval_words(TimeSpread(0.5, 0.4, 0.6), "PyTorch").startswith("2.00x slower than PyTorch")


def test_hot_rules_appear_with_their_text_and_provenance(records_by_policy, tmp_path):
    from kernelsage.evals.records import HotRule

    rule = HotRule(id=19, text="Parallelise the outermost loop.", source_text="Parallel loops and vectorisation",
                   kind="knowledge", adopting_ops=["l1_add", "l1_relu", "l2_softmax"], n_ado=5, utility=0.41,
                   tokens=12, source_episode="demo/sage:0:l1_relu")
    paths = write_report(records_by_policy, tmp_path, title="rules", hot_rules={"sage": [rule]})
    markdown = paths.markdown.read_text()
    section = markdown[markdown.index("## Hot rules at the end of the run (sage)"):]
    first = section.splitlines()[2]
    assert first.startswith("- Parallelise the outermost loop. — from knowledge 19 (\"Parallel loops and vectoris")
    assert "adopted 5 times on l1_add, l1_relu, l2_softmax" in first and "episode demo/sage:0:l1_relu" in first
    assert "none: no item passed the gate" in markdown[markdown.index("## Hot rules at the end of the run (none)"):]
    assert "Parallelise the outermost loop." in paths.html.read_text()


def test_a_replayed_run_keeps_its_banner_from_its_records_alone(records_by_policy, tmp_path):
    replayed = {"sage": [r.model_copy(update={"model": "replay:recording.jsonl"}) for r in records_by_policy["sage"]]}
    text = write_report(replayed, tmp_path / "a", title="again").markdown.read_text()
    assert "replayed from a recording (replay:recording.jsonl)" in text.split("## Comparison")[0]
    live = {"sage": [r.model_copy(update={"model": "openai:gpt-4o-mini"}) for r in records_by_policy["sage"]]}
    assert "replayed" not in write_report(live, tmp_path / "b", title="live").markdown.read_text()


@pytest.mark.parametrize("values", [
    [-0.2] * 17 + [0.0, 0.1],  # one item learned: the largest value must have its bar
    [0.1 * i - 0.2 for i in range(7)],
    [0.3] * 5,
])
def test_the_utility_histogram_counts_every_value_including_the_largest(values):
    import numpy as np

    from kernelsage.evals.report_plots import histogram_edges

    edges = histogram_edges(values)
    counts, _ = np.histogram(values, bins=edges)
    assert counts.sum() == len(values)
    assert edges[0] <= min(values) and edges[-1] >= max(values)
    assert counts[-1] >= values.count(max(values))
