"""Metrics (METHOD §9) and the episode-record loader, on hand-made records with answers found by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelsage.errors import ConfigurationError
from kernelsage.evals.metrics import (
    Ratio,
    SampleStat,
    compare,
    cumulative_adoption_rate,
    cumulative_er,
    p_key,
    summarize,
)
from kernelsage.evals.records import EpisodeRecord, group_by_policy, read_records

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "records" / "two_policies.jsonl"


def _record(task_id: str, *, solved: bool = True, position: int = 0, level: int | None = 1,
            t_first: float | None = None, t_best: float | None = None, t_reference: float | None = None,
            **fields) -> EpisodeRecord:
    values = {
        "run_id": "r", "policy": "sage", "model": "m", "backend": "cpu", "namespace": "ns",
        "position": position,
        "task_id": task_id, "level": level, "episode_id": f"e-{task_id}-{position}", "solved": solved,
        "rounds": 3, "candidates": 3, "compiled": 2, "correct_candidates": 1 if solved else 0,
        "first_correct_round": 2 if solved else None, "t_first": t_first, "t_best": t_best,
        "t_reference": t_reference,
    }
    return EpisodeRecord(**{**values, **fields})


def _solved(task_id: str, first: float, best: float, reference: float | None, **fields) -> EpisodeRecord:
    return _record(task_id, t_first=first, t_best=best, t_reference=reference, **fields)


# ---------------------------------------------------------------- Ratio and formatting


def test_ratio_keeps_counts_and_is_undefined_without_a_total():
    assert str(Ratio(84, 88)) == "95.5% (84/88)"
    assert Ratio(84, 88).value == pytest.approx(84 / 88)
    assert Ratio(0, 0).value is None
    assert str(Ratio(0, 0)) == "n/a (0/0)"
    assert Ratio(3, 4).to_dict() == {"n": 3, "total": 4, "value": 0.75}
    assert SampleStat(4.466, 84).format("x") == "4.47x (n=84)"
    assert str(SampleStat(None, 0)) == "n/a (n=0)"


def test_fast_p_keys_read_as_written():
    assert [p_key(p) for p in (0.0, 1, 1.5, 1.25, 2.0)] == ["0.0", "1.0", "1.5", "1.25", "2.0"]


# ---------------------------------------------------------------- known answers


def test_a_small_run_with_a_tie_at_the_reference_and_an_unsolved_operator():
    records = [
        _solved("a", first=4.0, best=1.0, reference=2.0),  # speedup 2 (ties fast_2.0's threshold), self 4
        _solved("b", first=3.0, best=1.0, reference=1.0),  # speedup exactly 1: does not beat the reference
        _solved("c", first=2.0, best=2.0, reference=8.0),  # speedup 4, self 1
        _record("d", solved=False, t_reference=5.0),  # unsolved: in ER's and fast_p's denominators only
    ]
    overall = summarize(records).overall
    assert overall.operators == 4
    assert overall.er == Ratio(3, 4)
    assert overall.fast1 == Ratio(2, 3)
    assert overall.speedup_median == SampleStat(2.0, 3)
    assert overall.speedup_geomean.value == pytest.approx((2 * 1 * 4) ** (1 / 3))
    assert overall.s_self_median == SampleStat(3.0, 3)
    assert overall.fast_p == {0.0: Ratio(3, 4), 1.0: Ratio(2, 4), 1.5: Ratio(2, 4), 2.0: Ratio(1, 4)}
    assert overall.cr == Ratio(8, 12)
    assert overall.acc == Ratio(3, 12)
    assert overall.mean_first_correct_round == SampleStat(2.0, 3)


@pytest.mark.parametrize(
    ("speedups", "median"),
    [((2.0, 2.0, 3.0, 3.0), math.sqrt(6.0)), ((2.0, 2.0, 2.0, 5.0), 2.0), ((1.5, 1.5, 1.5), 1.5)],
)
def test_median_speedup_with_tied_values(speedups, median):
    records = [_solved(f"t{i}", first=1.0, best=1.0, reference=s) for i, s in enumerate(speedups)]
    assert summarize(records).overall.speedup_median == SampleStat(median, len(speedups))


def test_zero_latencies_are_excluded_and_never_divided_by():
    records = [
        _solved("zero_best", first=1.0, best=0.0, reference=1.0, speedup=math.inf, self_speedup=math.inf),
        _solved("zero_reference", first=2.0, best=1.0, reference=0.0),  # self 2, no speedup
        _solved("zero_first", first=0.0, best=1.0, reference=3.0),  # speedup 3, no self speedup
        _solved("negative", first=1.0, best=-1.0, reference=1.0),
    ]
    overall = summarize(records).overall
    assert overall.speedup_median == SampleStat(3.0, 1)
    assert overall.s_self_median == SampleStat(2.0, 1)
    # Solved operators without a speedup stay in Fast1.0's denominator: nothing shows they beat the reference.
    assert overall.fast1 == Ratio(1, 4)


def test_a_missing_reference_leaves_self_speedup_but_no_speedup():
    records = [_solved("a", first=6.0, best=2.0, reference=None), _solved("b", 1.0, 1.0, 4.0)]
    overall = summarize(records).overall
    assert overall.s_self_median == SampleStat(math.sqrt(3.0), 2)  # median of (3, 1) on a log scale
    assert overall.speedup_median == SampleStat(4.0, 1)
    assert overall.fast1 == Ratio(1, 2)
    assert overall.fast_p[1.0] == Ratio(1, 2)


def test_the_credited_speedup_is_used_and_latencies_only_when_it_is_missing_or_invalid():
    records = [
        _record("only_ratio", speedup=3.0, self_speedup=5.0),
        # 1.5x measured, but within the noise: credited as 1.0 (docs/timing.md); self speedup from latencies
        _solved("noise_hidden", first=2.0, best=1.0, reference=1.5, speedup=1.0, self_speedup=99.0),
        _solved("no_ratio", first=1.0, best=1.0, reference=4.0, speedup=-1.0),
        _record("bad_ratio", speedup=-1.0, self_speedup=float("nan")),
    ]
    overall = summarize(records).overall
    assert overall.speedup_median == SampleStat(3.0, 3)  # median of (3, 1, 4)
    assert overall.fast1 == Ratio(2, 4)  # the noise-hidden 1.5x does not beat the reference
    assert overall.s_self_median == SampleStat(2.0, 3)  # median of (5, 2, 1)


def test_unsolved_operators_never_contribute_speedups():
    records = [_record("u", solved=False, t_first=9.0, t_best=1.0, t_reference=9.0, speedup=9.0)]
    overall = summarize(records).overall
    assert overall.er == Ratio(0, 1)
    assert overall.fast1 == Ratio(0, 0)
    assert overall.speedup_geomean == SampleStat(None, 0)
    assert overall.fast_p[0.0] == Ratio(0, 1)


def test_an_empty_run_has_undefined_metrics_with_zero_counts():
    summary = summarize([])
    overall = summary.overall
    assert overall.operators == 0
    assert (overall.er.value, overall.cr.value, overall.acc.value, overall.fast1.value) == (None,) * 4
    assert overall.speedup_median == SampleStat(None, 0)
    assert summary.by_level == {}
    assert cumulative_er([]) == []
    json.dumps(summary.to_dict())


def test_no_candidates_leaves_compilation_rate_undefined():
    overall = summarize([_record("a", solved=False, candidates=0, compiled=0, correct_candidates=0)]).overall
    assert overall.cr == Ratio(0, 0)
    assert overall.cr.value is None
    assert overall.acc.value is None


def test_metrics_are_split_by_level_and_levelless_records_count_overall_only():
    records = [
        _solved("l1a", 2.0, 1.0, 2.0, level=1, position=0),
        _record("l1b", solved=False, level=1, position=1),
        _solved("l2a", 1.0, 1.0, 0.5, level=2, position=2),
        _solved("free", 1.0, 1.0, 1.0, level=None, position=3),
    ]
    summary = summarize(records)
    assert sorted(summary.by_level) == [1, 2]
    assert summary.by_level[1].er == Ratio(1, 2)
    assert summary.by_level[1].fast1 == Ratio(1, 1)
    assert summary.by_level[2].er == Ratio(1, 1)
    assert summary.by_level[2].fast1 == Ratio(0, 1)
    assert summary.by_level[2].speedup_median == SampleStat(0.5, 1)
    assert summary.overall.er == Ratio(3, 4)
    level_1 = json.loads(json.dumps(summary.to_dict()))["by_level"]["1"]
    assert level_1["er"] == {"n": 1, "total": 2, "value": 0.5}


def test_a_task_seen_twice_counts_once_and_its_last_record_wins():
    records = [
        _record("a", solved=False, position=0, candidates=10, compiled=1),
        _solved("b", 1.0, 1.0, 2.0, position=1),
        _solved("a", 2.0, 1.0, 3.0, position=0, candidates=4, compiled=4),  # the re-run
    ]
    summary = summarize(records)
    assert summary.episodes == 3
    assert summary.superseded == 1
    assert summary.overall.operators == 2
    assert summary.overall.er == Ratio(2, 2)
    assert summary.overall.cr == Ratio(4 + 2, 4 + 3)
    assert cumulative_er(records) == [1.0, 1.0]


def test_adoption_rate_and_terminal_score():
    def exposure(adopted: bool) -> dict:
        return {"item_id": 1, "tier": "hot", "round": 1, "stage": "draft", "adopted": adopted}

    records = [
        _record("a", position=0, adoption=[exposure(True), exposure(False)], memory={"terminal_score": 1.0}),
        _record("b", position=1, adoption=[], memory={"terminal_score": None}),
        _record("c", position=2, adoption=[exposure(True)], memory={"terminal_score": -0.5}),
    ]
    overall = summarize(records).overall
    assert overall.adoption == Ratio(2, 3)
    assert overall.mean_terminal_score == SampleStat(0.25, 2)
    assert cumulative_adoption_rate(records) == [0.5, 0.5, pytest.approx(2 / 3)]
    assert cumulative_adoption_rate([_record("x")]) == [None]


def test_cumulative_er_follows_stream_positions_not_list_order():
    records = [
        _record("c", solved=False, position=2),
        _record("a", position=0),
        _record("b", solved=False, position=1),
    ]
    assert cumulative_er(records) == [1.0, 0.5, pytest.approx(1 / 3)]


def test_compare_gives_one_row_per_policy_in_order():
    rows = compare({
        "sage": [_solved("a", 2.0, 1.0, 2.0), _solved("b", 1.0, 1.0, 1.0, position=1)],
        "none": [_record("a", solved=False), _solved("b", 1.0, 1.0, 1.0, position=1)],
    })
    assert [row.policy for row in rows] == ["sage", "none"]
    assert [row.summary.overall.er for row in rows] == [Ratio(2, 2), Ratio(1, 2)]
    assert rows[0].task_ids == rows[1].task_ids == {"a", "b"}
    assert json.loads(json.dumps([row.to_dict() for row in rows]))[1]["overall"]["er"]["n"] == 1


# ---------------------------------------------------------------- properties


_latency = st.one_of(st.none(), st.just(0.0), st.floats(min_value=1e-6, max_value=1e3))
_records = st.lists(
    st.builds(
        lambda i, solved, level, first, best, reference: _record(
            f"t{i}", solved=solved, level=level, position=i, t_first=first, t_best=best, t_reference=reference
        ),
        st.integers(0, 12), st.booleans(), st.sampled_from([1, 2, 3, None]), _latency, _latency, _latency,
    ),
    max_size=15,
)


@settings(max_examples=60, deadline=None)
@given(_records)
def test_rates_stay_in_the_unit_interval_and_fast_p_shrinks_with_p(records):
    overall = summarize(records).overall
    for ratio in (overall.er, overall.fast1, *overall.fast_p.values()):
        assert ratio.value is None or 0.0 <= ratio.value <= 1.0
        assert 0 <= ratio.n <= ratio.total
    fast = [overall.fast_p[p].n for p in sorted(overall.fast_p)]
    assert fast == sorted(fast, reverse=True)
    assert overall.fast_p[0.0].n <= overall.er.n


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=12))
def test_geometric_mean_and_median_lie_between_the_extreme_speedups(speedups):
    records = [_solved(f"t{i}", 1.0, 1.0, s, position=i) for i, s in enumerate(speedups)]
    overall = summarize(records).overall
    assert min(speedups) <= overall.speedup_geomean.value <= max(speedups)
    assert min(speedups) <= overall.speedup_median.value <= max(speedups)
    assert overall.speedup_geomean.n == len(speedups)


# ---------------------------------------------------------------- the record file


def test_the_fixture_file_loads_and_groups_by_policy():
    records = read_records(FIXTURE)
    assert len(records) == 12
    groups = group_by_policy(records)
    assert list(groups) == ["sage", "none"]
    assert groups["sage"][2].memory.consolidation.promoted == (3,)
    assert groups["none"][0].memory_after is None


def test_unknown_fields_are_ignored_and_blank_lines_skipped(tmp_path):
    line = _record("a").model_dump(mode="json") | {"written_by": "a newer runner"}
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(line) + "\n\n", encoding="utf-8")
    assert [record.task_id for record in read_records(path)] == ["a"]


def test_a_malformed_record_is_reported_with_its_file_and_line(tmp_path):
    good = json.dumps(_record("a").model_dump(mode="json"))
    missing_field = json.loads(good)
    del missing_field["solved"]
    path = tmp_path / "records.jsonl"

    path.write_text(f"{good}\n{json.dumps(missing_field)}\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"records\.jsonl:2: .*solved"):
        read_records(path)

    path.write_text(f"{good}\n{good}\n{{not json\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"records\.jsonl:3: .*JSON"):
        read_records(path)

    with pytest.raises(ConfigurationError, match=r"absent\.jsonl"):
        read_records(tmp_path / "absent.jsonl")


# ---------------------------------------------------------------- medians of ratios, spreads


def test_a_median_of_two_speedups_is_between_them_on_a_log_scale_with_its_range():
    from kernelsage.evals.metrics import ratio_median

    median = ratio_median([11.52, 0.13])
    assert median.value == pytest.approx(math.sqrt(0.13 * 11.52))  # 1.22x, not the arithmetic 5.82x
    assert (median.low, median.high, median.n) == (0.13, 11.52, 2)
    assert median.format("x") == "1.22x (n=2, 0.13x to 11.52x)"
    assert ratio_median([3.0, 0.5, 2.0]).value == 2.0  # odd count: the middle value itself


@given(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=30))
@settings(max_examples=60, deadline=None)
def test_the_median_of_inverse_ratios_is_the_inverse_median(values):
    from kernelsage.evals.metrics import ratio_median

    median = ratio_median(values)
    assert median.value == pytest.approx(1 / ratio_median([1 / v for v in values]).value, rel=1e-9)
    assert min(values) <= median.value <= max(values)


def test_a_median_speedup_carries_the_interval_of_both_medians():
    from kernelsage.evals.metrics import median_speedup, time_spread
    from kernelsage.tools.results import Timing

    def timing(median, low, high):
        return Timing(mean=median * 3, median=median, cv=0.5, minimum=low, warmup=5, reps=100, ci_low=low,
                      ci_high=high)

    reference, candidate = time_spread(timing(2.0, 1.8, 2.4)), time_spread(timing(1.0, 0.9, 1.2))
    speedup = median_speedup(reference, candidate)
    assert speedup.median == 2.0  # from the medians, not the means (which would give 2.0 too, by chance: 6/3)
    assert speedup.low == pytest.approx(1.8 / 1.2) and speedup.high == pytest.approx(2.4 / 0.9)
    unmeasured = time_spread(timing(1.0, 0.0, 0.0))  # no interval recorded: the median alone
    assert (unmeasured.low, unmeasured.high) == (1.0, 1.0)
    assert time_spread(None) is None
