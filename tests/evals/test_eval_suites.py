"""`kernelsage eval` on a real suite layout: kernels in a tree that mirrors the nested task ids."""

from __future__ import annotations

import json
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
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout.splitlines()[-1])
    solved = {k["task_id"]: k["solved"] for k in payload["kernels"]}
    assert solved == {"level1/1_Scaled_Tanh": True, "level2/7_Linear_Sum_Dim": False}
    by_level = payload["summary"]["by_level"]
    assert by_level["1"]["er"]["n"] == 1 and by_level["2"]["er"]["n"] == 0
