"""Each suite's own tolerance rule by default, and a stricter one chosen for a run (never a looser one)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.tasks.loaders import find_task, load_suite, load_task
from kernelsage.tasks.model import TaskOrigin, tolerance_report
from kernelsage.tasks.tolerance import TOLERANCE_ENV, Tolerance, describe_table, parse_tolerance

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _task(source: Path | str, task_id: str, **options):
    return find_task(load_suite(source, **options), task_id)


def test_each_suite_judges_by_its_own_rule():
    kernelbench = _task(FIXTURES / "kernelbench", "level1/1_Scaled_Tanh")
    assert kernelbench.tolerance("float32") == Tolerance(1e-2, 1e-2)  # v0/v0.1's allclose(atol=rtol=1e-2)
    assert kernelbench.tolerance("float16") == Tolerance(1e-2, 1e-2)
    multi = _task(FIXTURES / "multikernelbench", "activation/leaky_relu")
    assert multi.origin.format == "multikernelbench" and multi.tolerance("float32") == Tolerance(1e-4, 1e-4)
    npu = _task(FIXTURES / "npukernelbench", "level2/Norm/RmsNormCustom")
    assert npu.tolerance("float32") == npu.tolerance("float16") == Tolerance(1e-3, 1e-3)  # one pair, every dtype
    builtin = _task("builtin", "l1_relu")
    assert builtin.tolerance("float32") == Tolerance(1e-3, 1e-3) and builtin.tolerance("float16") == Tolerance(1e-2, 1e-2)
    assert _task("builtin", "l3_matmul").tolerance("float32") == Tolerance(2e-3, 2e-3)  # the task's own
    for task in (kernelbench, multi, npu, builtin):
        assert task.tolerance("int32") == task.tolerance("bool") == Tolerance(0.0, 0.0)
        assert task.tolerance("float8_e4m3fn") == task.tolerance("float32")  # a dtype the rule does not list


def test_the_rule_says_where_it_comes_from():
    kernelbench = tolerance_report(_task(FIXTURES / "kernelbench", "level1/1_Scaled_Tanh"))
    assert kernelbench["rule"] == "KernelBench" and "src/eval.py" in kernelbench["source"]
    assert kernelbench["by_dtype"]["float32"] == {"atol": 0.01, "rtol": 0.01}
    assert kernelbench["text"].startswith("floats: atol 0.01, rtol 0.01; integers and bool: exact")
    assert kernelbench["stricter_for_this_run"] is None and kernelbench["custom_check"] is False
    npu = tolerance_report(_task(FIXTURES / "npukernelbench", "level1/Activation/GeluCustom"))
    assert "base_config.yaml" in npu["source"] and npu["custom_check"] is True
    assert npu["text"].startswith("the task's own custom_check_precision replaces")
    builtin = describe_table(_task("builtin", "l1_relu").tolerance_table())
    assert "float16: atol 0.01, rtol 0.01" in builtin and "float32, float64, complex64, complex128: atol 0.001" in builtin


@pytest.mark.parametrize(("text", "expected"), [("1e-4", Tolerance(1e-4, 1e-4)), ("1e-4,1e-5", Tolerance(1e-4, 1e-5)),
                                                (" 0.001 , 0 ", Tolerance(1e-3, 0.0)), (".5", Tolerance(0.5, 0.5))])
def test_a_run_s_tolerance_reads_as_atol_and_rtol(text, expected):
    assert parse_tolerance(text) == expected


@pytest.mark.parametrize("text", ["", "tight", "-1e-4", "1e-4,", "1e-4,1e-5,1e-6", "nan", "1e-4;1e-5"])
def test_a_bad_tolerance_is_one_clear_error(text):
    with pytest.raises(ConfigurationError, match="give ATOL or ATOL,RTOL"):
        parse_tolerance(text)


def test_a_stricter_tolerance_judges_the_run_and_travels_to_the_worker():
    task = _task(FIXTURES / "kernelbench", "level1/1_Scaled_Tanh", tolerance="1e-4,1e-5", shape_budget="1MiB")
    assert task.tolerance("float32") == task.tolerance("float16") == Tolerance(1e-4, 1e-5)
    assert task.tolerance("int64") == Tolerance(0.0, 0.0)  # integers stay exact
    assert task.origin.tolerance == Tolerance(1e-4, 1e-5)
    payload = json.loads(json.dumps(dataclasses.asdict(task.origin)))  # as the backend hands it to the worker
    again = load_task(TaskOrigin(**payload), task.id)  # what the sandbox's worker does
    assert again.tolerance("float32") == Tolerance(1e-4, 1e-5) and again.origin.scaling == task.origin.scaling
    shown = tolerance_report(task)
    assert shown["stricter_for_this_run"] == {"atol": 1e-4, "rtol": 1e-5} and "stricter for this run" in shown["text"]


def test_a_looser_tolerance_than_the_suite_s_is_refused():
    with pytest.raises(ConfigurationError, match=r"looser than NPUKernelBench's rule .*atol 0\.001, rtol 0\.001"):
        load_suite(FIXTURES / "npukernelbench", tolerance="1e-2")
    with pytest.raises(ConfigurationError, match="looser than KernelBench's rule"):
        load_suite(FIXTURES / "kernelbench", tolerance="1e-3,0.1")  # the relative bound alone is looser
    with pytest.raises(ConfigurationError, match="for float32"):
        load_suite("builtin", tolerance="5e-3")  # stricter than float16's 1e-2, looser than float32's 1e-3
    assert _task(FIXTURES / "kernelbench", "level1/1_Scaled_Tanh", tolerance="1e-2").tolerance("float32") == \
        Tolerance(1e-2, 1e-2)  # the suite's own numbers are allowed


def test_the_environment_gives_a_run_s_tolerance(monkeypatch):
    monkeypatch.setenv(TOLERANCE_ENV, "2e-4")
    assert _task(FIXTURES / "kernelbench", "level1/1_Scaled_Tanh").tolerance("float32") == Tolerance(2e-4, 2e-4)
    assert _task(FIXTURES / "kernelbench", "level1/1_Scaled_Tanh", tolerance="1e-5").tolerance("float32") == \
        Tolerance(1e-5, 1e-5)  # the argument wins
    monkeypatch.setenv(TOLERANCE_ENV, "loose")
    with pytest.raises(ConfigurationError, match="tolerance 'loose'"):
        load_suite(FIXTURES / "kernelbench")
