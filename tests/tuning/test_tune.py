"""`kernelsage tune` and the tuning loop end to end on the cpu backend (real builds, verifies and profiles of a
small ReLU): every configuration verified before it is timed, a wrong one never timed nor chosen, the budget
kept, the record JSON-ready; what cannot be tuned is one error line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tuning import TuningError, TuningParams, tune

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
KERNELS = HERE / "kernels"
SUITE = ROOT / "tests" / "fixtures" / "suite"


@pytest.fixture(scope="module")
def relu32():
    return find_task(load_suite(SUITE), "relu32")


def kernelsage(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from kernelsage.cli import main; main()", *args],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "KERNELSAGE_CACHE": str(cache)},
                          timeout=300, check=False)


def test_tune_prints_json_with_every_configuration_verified_timed_and_the_budget_kept(tmp_path: Path) -> None:
    # A real run: 4 builds and 15 profiles of a 512 x 512 ReLU with 10 to 80 timed calls (about 8-12 s).
    done = kernelsage("tune", "--task", "relu32", "--suite", str(SUITE), "--source", str(KERNELS / "relu_tunable.cpp"),
                      "--budget", "20", "--reps", "10", "--json", cache=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["parameters"] == {"CHUNK": [256, 64, 1024, 4096], "UNROLL": [1, 2, 4]} and result["space_size"] == 12
    tried = result["tried"]
    assert tried[0]["is_default"] and tried[0]["values"] == {"CHUNK": 256, "UNROLL": 1} == result["default"]
    assert result["evaluations"] == result["compiles"] + result["profiles"] <= 20
    assert result["compiles"] == len(tried) >= 4 and sum(t["profiles"] for t in tried) == result["profiles"]
    for entry in tried:  # all correct, each timed beside the reference with the median's interval
        assert entry["verdict"] == "correct"
        assert 0 < entry["candidate"]["ci_low"] <= entry["candidate"]["median"] <= entry["candidate"]["ci_high"]
        assert entry["reference"]["ci_low"] > 0
    assert result["winner"] in [t["values"] for t in tried]
    if result["winner"] != result["default"]:  # only a clear win replaces the default, faster in every round
        assert result["gain"][1] >= 1.05 and "4 paired rounds" in result["decision"]
    assert "tried CHUNK=256 UNROLL=1: correct" in done.stderr


def test_a_wrong_configuration_is_verified_never_timed_nor_chosen(tuning_backend, relu32) -> None:
    files = {"kernel.cpp": (KERNELS / "relu_wrong_unrolled.cpp").read_text()}
    result = tune(tuning_backend, relu32, files, budget=14, params=TuningParams(final_rounds=2))
    verdicts = {t.values["UNROLL"]: t for t in result.tried}
    assert set(verdicts) == {1, 2, 4}
    assert verdicts[4].verdict == "partial_write" and verdicts[4].candidate is None and verdicts[4].profiles == 0
    assert verdicts[1].verdict == verdicts[2].verdict == "correct"
    assert result.winner["UNROLL"] != 4 and result.evaluations <= 14
    json.dumps(result.to_dict())  # the record is JSON-ready as it is


def test_what_cannot_be_tuned_says_why(tuning_backend, relu32) -> None:
    with pytest.raises(TuningError, match="no tunable parameters declared"):
        tune(tuning_backend, relu32, {"kernel.cpp": (ROOT / "src/kernelsage/tools/cpu/examples/l1_relu.cpp").read_text()})
    with pytest.raises(TuningError, match=r"not correct at its default configuration \(SCALE=2\): wrong_result"):
        tune(tuning_backend, relu32, {"kernel.cpp": (KERNELS / "relu_wrong_default.cpp").read_text()})
    with pytest.raises(TuningError, match="only one configuration is declared"):
        tune(tuning_backend, relu32, {"kernel.cpp": "KS_TUNABLE(ONLY, 1);\n"})
    with pytest.raises(TuningError, match="cannot evaluate even the default"):
        tune(tuning_backend, relu32, {"kernel.cpp": (KERNELS / "relu_tunable.cpp").read_text()}, budget=1)


def test_a_bad_declaration_is_one_error_line_from_the_command(tmp_path: Path) -> None:
    source = tmp_path / "kernel.cpp"
    source.write_text((KERNELS / "relu_tunable.cpp").read_text().replace("KS_TUNABLE(UNROLL, 1, 2, 4)",
                                                                        "KS_TUNABLE(UNROLL, 1, two)"))
    done = kernelsage("tune", "--task", "relu32", "--suite", str(SUITE), "--source", str(source), cache=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "kernel.cpp:7: KS_TUNABLE(UNROLL, 1, two): 'two' is not an integer literal" in done.stderr
