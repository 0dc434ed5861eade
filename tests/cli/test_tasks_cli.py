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
    from kernelsage.tools.judging import resources

    assert (MEMORY_LIMIT_ENV, TIME_LIMIT_ENV) == (resources.MEMORY_LIMIT_ENV, resources.TIME_LIMIT_ENV)
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


def test_tasks_list_labels_npukernelbench_levels_from_the_level_folder(tmp_path):
    done = kernelsage("tasks", "list", "--suite", str(FIXTURES / "npukernelbench" / "tasks" / "level3"), "--json",
                      cache=tmp_path)
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout.splitlines()[-1])
    assert {(t["id"], t["level"]) for t in listing["tasks"]} == {("Compare/LessEqualPair", 3),
                                                                 ("Creation/FillScalar", 3)}


def test_tasks_show_names_the_tolerance_and_where_it_comes_from(tmp_path):
    shown = kernelsage("tasks", "show", "level1/1_Scaled_Tanh", "--suite", str(FIXTURES / "kernelbench"), "--json",
                       cache=tmp_path)
    assert shown.returncode == 0, shown.stderr
    tolerance = json.loads(shown.stdout.splitlines()[-1])["tolerance"]
    assert tolerance["rule"] == "KernelBench" and "src/eval.py" in tolerance["source"]
    assert tolerance["by_dtype"]["float32"] == {"atol": 0.01, "rtol": 0.01}
    text = kernelsage("tasks", "show", "level2/Norm/RmsNormCustom", "--suite", str(FIXTURES / "npukernelbench"),
                      "--tolerance", "1e-4", cache=tmp_path)
    assert text.returncode == 0, text.stderr
    assert ("tolerance: floats: atol 0.0001, rtol 0.0001; integers and bool: exact (stricter for this run than "
            "NPUKernelBench's rule: base_config.yaml") in text.stdout


def test_tasks_show_reads_only_its_task_and_says_why_it_does_not_load(tmp_path):
    broken = kernelsage("tasks", "show", "level1/2_No_Inputs_Function", "--suite", str(FIXTURES / "kernelbench"),
                        cache=tmp_path)
    assert broken.returncode == 2 and "no get_inputs() function" in broken.stderr
    assert broken.stderr.strip().count("\n") == 0 and "Traceback" not in broken.stderr


# A scaled tanh 0.4% too large: within KernelBench's relative tolerance (1e-2), outside 1e-3.
SCALED_TANH_OFF = """#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const float scale = (float)ks_attr_float(attrs, n_attrs, "scale", 1.0);
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = std::tanh(x[i]) * scale * 1.004f;
    return 0;
}
"""


def test_check_judges_by_the_suite_s_rule_unless_the_run_asks_for_a_stricter_one(tmp_path):
    source = tmp_path / "scaled_tanh.cpp"
    source.write_text(SCALED_TANH_OFF)
    check = ("check", "--task", "level1/1_Scaled_Tanh", "--suite", str(FIXTURES / "kernelbench"), "--source",
             str(source), "--json")
    default = kernelsage(*check, cache=tmp_path)
    verify = json.loads(default.stdout.splitlines()[-1])["verify"]
    assert verify["correct"] is True, default.stderr
    assert {(c["atol"], c["rtol"]) for c in verify["cases"]} == {(0.01, 0.01)}
    strict = kernelsage(*check, "--tolerance", "1e-3", cache=tmp_path)
    assert strict.returncode == 1
    verify = json.loads(strict.stdout.splitlines()[-1])["verify"]
    assert verify["correct"] is False and {(c["atol"], c["rtol"]) for c in verify["cases"]} == {(1e-3, 1e-3)}
    loose = kernelsage(*check, "--tolerance", "0.05", cache=tmp_path)
    assert loose.returncode == 2 and loose.stderr.strip().count("\n") == 0
    assert "looser than KernelBench's rule for level1/1_Scaled_Tanh" in loose.stderr


def test_a_run_s_tolerance_goes_through_the_environment_for_that_run_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelsage.cli.task_options import TOLERANCE_ENV, exported_settings
    from kernelsage.errors import ConfigurationError
    from kernelsage.tasks import tolerance

    assert TOLERANCE_ENV == tolerance.TOLERANCE_ENV  # the variable the suite loader reads
    monkeypatch.delenv(TOLERANCE_ENV, raising=False)
    with exported_settings(None, None, None, "1e-5"):
        assert os.environ[TOLERANCE_ENV] == "1e-5"
    assert TOLERANCE_ENV not in os.environ
    with pytest.raises(ConfigurationError, match="tolerance 'tight'"), exported_settings(None, None, None, "tight"):
        pass  # refused before the run starts


def test_tasks_conform_says_per_task_whether_the_backend_runs_it_as_pure_json(tmp_path):
    done = kernelsage("tasks", "conform", "--suite", str(FIXTURES / "kernelbench_tracked"), "--backend", "triton",
                      "--json", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert result["backend"] == "triton" and result["format"] == "kernelbench" and result["routes"] == ["triton"]
    assert {t["id"]: t["runnable"] for t in result["tasks"]} == {
        "level1/3_Halve": True, "level1/4_Broken": False, "level1/5_Mismatch": False}
    assert result["summary"]["tasks"] == 3 and result["summary"]["runnable"] == 1
    assert result["tasks"][0]["routes"] == {"triton": ""} and result["tasks"][0]["reason"] is None


def test_tasks_conform_applies_triton_ascend_s_rules_on_its_track_and_sums_up(tmp_path):
    done = kernelsage("tasks", "conform", "--suite", str(FIXTURES / "multikernelbench_groups"), "--backend", "triton",
                      cache=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == ("activation/double_relu: refused: case default: input x is float64, which triton-ascend has "
                        "no kernels for on Ascend A2/A3 NPUs")
    assert lines[1].startswith("activation/out_of_range: refused: its reference cannot run where kernelsage")
    assert lines[2] == "npukernelbench_level2/1_scale_shift_backward: runnable (triton_ascend)"
    assert lines[-1].startswith("1 of 3 tasks runnable by the triton backend as the suite's harness runs them "
                                "(triton_ascend); 2 refused")
    wrong = kernelsage("tasks", "conform", "--suite", str(FIXTURES / "multikernelbench_groups"), "--backend", "cuda",
                       cache=tmp_path)
    assert wrong.returncode == 2 and wrong.stderr.strip() == "error: --backend 'cuda': conform knows ascend and triton"


def test_tasks_conform_loads_no_model_stack(tmp_path):
    from tests.cli.test_light_commands import MODEL_STACK, heavy, probe

    (seen,) = probe(tmp_path, ["tasks", "conform", "--suite", str(FIXTURES / "npukernelbench_structured"), "--json"])
    assert seen["code"] == 0
    # torch describes the cases (on the meta device, whose decompositions load torch's compiler and with it
    # triton where it is installed); nothing of the agent's graph or models is loaded
    assert heavy(seen["added"], tuple(name for name in MODEL_STACK if name not in ("torch", "triton"))) == []


def test_tasks_show_gives_the_reference_s_structure_and_the_kernelbench_rule(tmp_path):
    shown = kernelsage("tasks", "show", "level2/Norm/BiasedRmsNorm", "--suite", str(FIXTURES / "npukernelbench_structured"),
                       cache=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "[2] bias: None (an optional input this case leaves out" in shown.stdout
    assert "the reference returns a tuple of 2 tensors = outputs[0..1]" in shown.stdout
    published = json.loads(kernelsage("tasks", "show", "level1/3_Halve", "--suite",
                                      str(FIXTURES / "kernelbench_eval_per_dtype"), "--json", "--tolerance-rule",
                                      "published", cache=tmp_path).stdout)["tolerance"]
    assert published["rule_name"] == "published" and published["by_dtype"]["float32"] == {"atol": 0.01, "rtol": 0.01}
