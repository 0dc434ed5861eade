"""Real suite layouts through the commands: `eval` with kernels in a tree that mirrors the nested task ids,
`run` over an NPUKernelBench level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

SCALED_TANH = """#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const float scale = (float)ks_attr_float(attrs, n_attrs, "scale", 1.0);
    const int64_t n = ks_numel(&inputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]) * scale;
    return 0;
}
"""


def test_eval_scores_kernels_named_by_nested_ids(tmp_path: Path) -> None:
    kernels = tmp_path / "kernels"
    (kernels / "level1").mkdir(parents=True)
    (kernels / "level1" / "1_Scaled_Tanh.cpp").write_text(SCALED_TANH)
    (kernels / "level2").mkdir()
    (kernels / "level2" / "7_Linear_Sum_Dim.cpp").write_text(SCALED_TANH)  # the wrong operator
    result = subprocess.run([sys.executable, "-m", "kernelsage", "eval", str(kernels), "--suite",
                             str(FIXTURES / "kernelbench"), "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr  # one kernel is not correct: eval ends 1, as check does
    assert "level2/7_Linear_Sum_Dim" in result.stderr
    payload = json.loads(result.stdout.splitlines()[-1])
    solved = {k["task_id"]: k["solved"] for k in payload["kernels"]}
    assert solved == {"level1/1_Scaled_Tanh": True, "level2/7_Linear_Sum_Dim": False}
    by_level = payload["summary"]["by_level"]
    assert by_level["1"]["er"]["n"] == 1 and by_level["2"]["er"]["n"] == 0


def _verified(kernels: Path, output: Path, *options: str) -> dict[str, bool]:
    result = subprocess.run([sys.executable, "-m", "kernelsage", "eval", str(kernels), "--suite",
                             str(FIXTURES / "kernelbench"), "--output", str(output), *options, "--json"],
                            capture_output=True, text=True, timeout=300)
    records = [json.loads(line) for line in output.read_text().splitlines()]
    verified = {r["task_id"]: r["attempts"][0]["evaluation"]["verify"]["correct"] for r in records}
    assert result.returncode == (0 if all(verified.values()) else 1), result.stderr  # as check ends
    return verified


def test_eval_judges_by_the_suite_s_tolerance_unless_asked_for_a_stricter_one(tmp_path: Path) -> None:
    """A scaled tanh 0.4% off: correct by KernelBench's rule (atol = rtol = 1e-2), wrong at --tolerance 1e-3."""
    kernels = tmp_path / "kernels"
    (kernels / "level1").mkdir(parents=True)
    (kernels / "level1" / "1_Scaled_Tanh.cpp").write_text(SCALED_TANH.replace("* scale;", "* scale * 1.004f;"))
    assert _verified(kernels, tmp_path / "default.jsonl") == {"level1/1_Scaled_Tanh": True}
    assert _verified(kernels, tmp_path / "strict.jsonl", "--tolerance", "1e-3") == {"level1/1_Scaled_Tanh": False}


GELU_TANH = (FIXTURES.parent / "tools" / "kernels" / "gelu_tanh_offset.cpp").read_text().replace("OFFSET", "0.0f")


def test_run_goes_through_an_npukernelbench_level_with_a_scripted_model(database_url: str, tmp_path: Path) -> None:
    """`kernelsage run` as a user runs it, against a local OpenAI-compatible server that answers from a script
    (a labelled test double): level 1 of a suite in NPUKernelBench's layout, shapes scaled to a budget, one task
    whose reference needs an NPU and one that does not load (both recorded as harness errors) and one solved."""
    from tests.graph.scripts import candidate
    from tests.models.openai_server import answer, embeddings_env, serve

    run_dir = tmp_path / "run"
    env = {**os.environ, "DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1", "KERNELSAGE_MODEL_API_KEY": "sk-test",
           "KERNELSAGE_MODEL_ATTEMPTS": "1"}
    with serve([answer(candidate(GELU_TANH))]) as server:
        result = subprocess.run(
            [sys.executable, "-m", "kernelsage", "run", "--model", "openai:scripted-test-double", "--suite",
             str(FIXTURES / "npukernelbench"), "--order", "level:1", "--budget", "1", "--run-id", "npu-level1",
             "--run-dir", str(run_dir), "--namespace", f"npu-{tmp_path.name}", "--shape-budget", "4KiB",
             "--time-limit", "60", "--json"],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
            env={**env, "KERNELSAGE_MODEL_BASE_URL": server.url, **embeddings_env(server.url)})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    records = {r["task_id"]: r for r in map(json.loads, (run_dir / "sage.jsonl").read_text().splitlines())}
    assert set(records) == {"level1/Activation/FastGeluNpu", "level1/Activation/GeluCustom", "level1/Broken/NoCases"}
    npu_only = records["level1/Activation/FastGeluNpu"]
    assert npu_only["failure"].startswith("harness_error:") and "npu_fast_gelu" in npu_only["failure"]
    assert npu_only["rounds"] == 0 and not npu_only["memory"]["updated"]
    unloadable = records["level1/Broken/NoCases"]
    assert unloadable["failure"].startswith("harness_error:") and unloadable["rounds"] == 0
    assert not unloadable["memory"]["updated"]
    gelu = records["level1/Activation/GeluCustom"]
    assert gelu["attempts"][0]["evaluation"]["verify"]["correct"], gelu["attempts"][0]
    # The record of which shapes ran: the largest row scaled to the budget, as every case the judge checked.
    shapes = json.loads((run_dir / "sage.cases.json").read_text())["level1/Activation/GeluCustom"]
    largest = next(c for c in shapes["cases"] if c["case"] == "case_3")
    assert largest["inputs"][0]["shape"] != [64, 128] and shapes["scaling"]["budget"] == 4096
    checked = {c["case"] for c in gelu["attempts"][0]["evaluation"]["verify"]["cases"]}
    assert checked == {c["case"] for c in shapes["cases"]}
