"""KernelBench's tolerance follows the checkout's own eval.py (read with ast, never imported): one pair for every
dtype in v0/v0.1's form, a tolerance per precision in the 0.2 development code's; the published rule by name."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.tasks.loaders import load_suite, load_task
from kernelsage.tasks.loaders.kernelbench_rule import kernelbench_rule, rule_name
from kernelsage.tasks.model import tolerance_report
from kernelsage.tasks.tolerance import KERNELBENCH_RULE, Tolerance

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
V01 = FIXTURES / "kernelbench_eval_v01"  # src/eval.py: torch.allclose(atol=1e-02, rtol=1e-02)
PER_DTYPE = FIXTURES / "kernelbench_eval_per_dtype"  # src/kernelbench/eval.py: {torch.float32: 1e-4, ...}


def test_the_one_pair_of_the_published_eval_py_judges_every_dtype() -> None:
    rule = kernelbench_rule(V01)
    assert rule.name == "checkout" and set(rule.floats.values()) == {Tolerance(1e-2, 1e-2)}
    assert rule.source.startswith("src/eval.py line 7: torch.allclose(atol=0.01, rtol=0.01)")


def test_the_per_precision_table_of_the_newer_eval_py_is_followed_dtype_by_dtype() -> None:
    rule = kernelbench_rule(PER_DTYPE)
    assert rule.floats["float32"] == Tolerance(1e-4, 1e-4)
    assert rule.floats["float16"] == rule.floats["bfloat16"] == Tolerance(1e-2, 1e-2)
    assert rule.floats["float64"] == Tolerance(1e-4, 1e-4)  # not listed upstream: as strict as float32
    assert "src/kernelbench/eval.py lines 7-11" in rule.source and "version 0.2.0.dev0" in rule.source


def test_a_task_is_judged_by_its_checkout_s_rule_unless_the_published_one_is_asked_for(monkeypatch) -> None:
    (task,) = load_suite(PER_DTYPE).tasks
    assert task.tolerance("float32") == Tolerance(1e-4, 1e-4) and task.origin.tolerance_rule == "checkout"
    report = tolerance_report(task)
    assert report["rule_name"] == "checkout" and "src/kernelbench/eval.py" in report["text"]
    (published,) = load_suite(PER_DTYPE, tolerance_rule="published").tasks
    assert published.tolerance("float32") == Tolerance(1e-2, 1e-2)
    assert tolerance_report(published)["rule_name"] == "published"
    monkeypatch.setenv("KERNELSAGE_TOLERANCE_RULE", "published")
    (from_env,) = load_suite(PER_DTYPE).tasks
    assert from_env.tolerance("float32") == Tolerance(1e-2, 1e-2)


def test_the_chosen_rule_travels_to_a_worker_with_the_task() -> None:
    (task,) = load_suite(PER_DTYPE, tolerance_rule="published").tasks
    origin = dataclasses.asdict(task.origin)  # as the sandbox's payload carries it
    again = load_task(type(task.origin)(**origin), task.id)
    assert again.tolerance("float32") == Tolerance(1e-2, 1e-2) and again.origin.tolerance_rule == "published"


def test_without_a_recognised_eval_py_the_published_rule_judges_and_says_why(tmp_path: Path) -> None:
    assert kernelbench_rule(None).floats == KERNELBENCH_RULE.floats
    assert "no KernelBench checkout" in kernelbench_rule(None).source
    assert "has no src/kernelbench/eval.py or src/eval.py" in kernelbench_rule(tmp_path).source
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "eval.py").write_text("def compare(a, b):\n    return (a - b).abs().max() < 1\n")
    assert "sets no tolerance kernelsage recognises" in kernelbench_rule(tmp_path).source
    with pytest.raises(ConfigurationError, match="choose checkout or published"):
        rule_name("newest")
