"""`kernelsage tasks list|show` and `kernelsage check`, through the real command; the backend's limits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "src" / "kernelsage" / "tools" / "cpu" / "examples"
KERNELS = ROOT / "tests" / "tools" / "kernels"


def kernelsage(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from kernelsage.cli import main; main()", *args],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "KERNELSAGE_CACHE": str(cache)},
                          timeout=300, check=False)


def test_tasks_list_json_filters_by_level(tmp_path):
    done = kernelsage("tasks", "list", "--level", "3", "--json", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout.splitlines()[-1])
    assert listing["tasks"] and {t["level"] for t in listing["tasks"]} == {3}
    assert "l3_matmul" in {t["id"] for t in listing["tasks"]}


def test_tasks_list_reports_broken_files(tmp_path):
    done = kernelsage("tasks", "list", "--suite", str(ROOT / "tests" / "fixtures" / "suite_broken"), "--json",
                      cache=tmp_path)
    listing = json.loads(done.stdout.splitlines()[-1])
    assert [t["id"] for t in listing["tasks"]] == ["relu32"] and len(listing["problems"]) == 4


def test_check_exit_code_follows_correctness(tmp_path):
    good = kernelsage("check", "--task", "l1_relu", "--source", str(EXAMPLES / "l1_relu.cpp"), "--json",
                      cache=tmp_path)
    assert good.returncode == 0, good.stderr
    report = json.loads(good.stdout.splitlines()[-1])
    assert report["correct"] is True and report["profile"]["ok"] is True

    bad = kernelsage("check", "--task", "l1_relu", "--source", str(KERNELS / "nan_result.cpp"), "--json",
                     cache=tmp_path)
    assert bad.returncode == 1
    assert json.loads(bad.stdout.splitlines()[-1])["verify"]["correct"] is False


def test_check_errors_are_one_line(tmp_path):
    missing = kernelsage("check", "--task", "l1_relu", "--source", str(tmp_path / "none.cpp"), cache=tmp_path)
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0
    assert "no such source file" in missing.stderr
    unknown = kernelsage("check", "--task", "l9_nothing", "--source", str(EXAMPLES / "l1_relu.cpp"), cache=tmp_path)
    assert unknown.returncode == 2 and "unknown task 'l9_nothing'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


FIXTURES = ROOT / "tests" / "fixtures"


def test_tasks_show_gives_the_interface_in_kernel_order(tmp_path):
    done = kernelsage("tasks", "show", "level2/7_Linear_Sum_Dim", "--suite", str(FIXTURES / "kernelbench"), "--json",
                      cache=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.splitlines()[-1])
    assert shown["level"] == 2 and shown["perf_case"] == "default" and shown["scaling"] is None
    (case,) = shown["cases"]
    assert [(i["name"], i["dtype"], i["shape"]) for i in case["inputs"]] == [
        ("x", "float32", [8, 12]), ("param.linear.weight", "float32", [5, 12]), ("param.linear.bias", "float32", [5])]
    assert case["outputs"] == [{"name": "outputs[0]", "dtype": "float32", "shape": [8]}]
    assert case["attrs"] == {"dim": 1, "in_features": 12, "out_features": 5, "linear.in_features": 12,
                             "linear.out_features": 5}

    text = kernelsage("tasks", "show", "level1/Activation/GeluCustom", "--suite", str(FIXTURES / "npukernelbench"),
                      cache=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "case case_2:" in text.stdout and "inputs[0] x: float32 [3, 5, 7]" in text.stdout


def test_tasks_show_scales_to_a_budget_and_names_unknown_tasks(tmp_path):
    done = kernelsage("tasks", "show", "level1/Activation/GeluCustom", "--suite", str(FIXTURES / "npukernelbench"),
                      "--shape-budget", "16KiB", "--json", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.splitlines()[-1])
    largest = next(c for c in shown["cases"] if c["case"] == "case_3")
    assert largest["inputs"][0]["shape"] != [64, 128] and largest["params"]["shape"] != "[64, 128]"
    assert shown["scaling"]["budget"] == 16 << 10
    missing = kernelsage("tasks", "show", "Gelu", "--suite", str(FIXTURES / "npukernelbench"), cache=tmp_path)
    assert missing.returncode == 2 and "did you mean" in missing.stderr
    assert "level1/Activation/GeluCustom" in missing.stderr
    bad = kernelsage("tasks", "show", "x", "--suite", str(FIXTURES / "npukernelbench"), "--shape-budget", "lots",
                     cache=tmp_path)
    assert bad.returncode == 2 and "shape budget 'lots'" in bad.stderr and "Traceback" not in bad.stderr


def test_check_honours_the_time_limit(tmp_path):
    done = kernelsage("check", "--task", "l1_relu", "--source", str(KERNELS / "infinite_loop.cpp"), "--time-limit",
                      "3", "--json", cache=tmp_path)
    assert done.returncode == 1, done.stderr
    verify = json.loads(done.stdout.splitlines()[-1])["verify"]
    assert verify["status"] == "timeout" and "3 s" in verify["message"] and verify["seconds"] < 30


def test_backend_limits_come_from_options_else_the_environment(monkeypatch):
    from kernelsage.cli.task_options import MEMORY_LIMIT_ENV, TIME_LIMIT_ENV, backend_options
    from kernelsage.errors import BackendError
    from kernelsage.tools import get_backend
    from kernelsage.tools.cpu import backend as cpu

    assert (MEMORY_LIMIT_ENV, TIME_LIMIT_ENV) == (cpu.MEMORY_LIMIT_ENV, cpu.TIME_LIMIT_ENV)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "512")
    monkeypatch.setenv(TIME_LIMIT_ENV, "200")
    with get_backend("cpu", **backend_options(None, 5.0)) as backend:
        limits = backend.run_limits
        assert limits.memory_bytes == limits.harness_memory_bytes == 512 << 20  # from the environment
        assert (limits.wall_s, limits.cpu_s) == (5.0, 10.0)  # the option wins over the environment
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "a lot")
    with pytest.raises(BackendError, match="KERNELSAGE_CPU_MEMORY_MB='a lot'"):
        get_backend("cpu")


def test_a_run_s_settings_do_not_outlive_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """run/compare hand --shape-budget and the limits on through the environment, for that command only."""
    from kernelsage.cli.task_options import MEMORY_LIMIT_ENV, SHAPE_BUDGET_ENV, exported_settings

    monkeypatch.setenv(SHAPE_BUDGET_ENV, "1MiB")
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    with exported_settings("2MiB", 512, None):
        assert os.environ[SHAPE_BUDGET_ENV] == "2MiB" and os.environ[MEMORY_LIMIT_ENV] == "512"
    assert os.environ[SHAPE_BUDGET_ENV] == "1MiB" and MEMORY_LIMIT_ENV not in os.environ
