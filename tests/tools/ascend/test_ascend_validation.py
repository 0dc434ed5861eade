"""scripts/validate_ascend.sh: its report (one table of compile / verify / profile verdicts under the CANN
release and layout, every surprise listed and failing the exit code) and its refusal, in one line, on a host
that is not set up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernelsage.tools.ascend.validation_report import main, render

REPO = Path(__file__).resolve().parents[3]
DOCTOR = [{"name": "isolation", "status": "ok", "detail": "bubblewrap"},
          {"name": "ascend CANN", "status": "ok", "detail": "8.1.RC1 at /usr/local/Ascend/ascend-toolkit/latest"},
          {"name": "ascend layout", "status": "ok", "detail": "ascendc (CANN 8.1 - 9.x): kernel_operator.h at /x"},
          {"name": "ascend SoC", "status": "ok", "detail": "Ascend910B3 (--npu-arch=dav-2201), from npu-smi"}]
CORRECT = {"task": "l1_relu", "correct": True, "status": "ok",
           "compile": {"ok": True, "status": "ok", "seconds": 12.5, "errors": []},
           "verify": {"status": "ok", "correct": True, "cases": [{}, {}, {}], "message": "on Ascend910B3"},
           "profile": {"status": "ok", "ok": True, "output_correct": True, "speedup": 1.5,
                       "candidate": {"mean": 10e-6}, "reference": {"mean": 15e-6}, "message": "NPU event timing"}}
LINK_ERROR = {"task": "l1_gelu", "correct": False, "status": "compile_error",
              "compile": {"ok": False, "status": "compile_error", "seconds": 3.0, "errors": [
                  {"file": "", "line": 0, "severity": "error",
                   "message": "undefined symbol: rtKernelLaunchWithHandleV2"}]},
              "verify": None, "profile": None}


def _write(directory: Path, doctor: list, reports: dict[str, object]) -> None:
    (directory / "doctor.json").write_text(json.dumps(doctor))
    for task, report in reports.items():
        if report is None:
            (directory / f"{task}.err").write_text("Traceback ...\nerror: the NPU runtime did not start\n")
        else:
            (directory / f"{task}.json").write_text(json.dumps(report))


def test_a_clean_run_is_one_table_under_the_release_and_layout(tmp_path: Path) -> None:
    _write(tmp_path, DOCTOR, {"l1_relu": CORRECT})
    text, surprised = render(tmp_path, ["l1_relu"])
    lines = text.splitlines()
    assert lines[0] == "CANN:    8.1.RC1 at /usr/local/Ascend/ascend-toolkit/latest"
    assert lines[1].startswith("layout:  ascendc (CANN 8.1 - 9.x)")
    header, row = lines[4], lines[5]
    assert header.split() == ["kernel", "compile", "verify", "profile"]
    assert row.split("  ")[0] == "l1_relu" and "ok 12.5s" in row and "ok (3 cases)" in row
    assert "1.50x (kernel 10.0 us, torch_npu 15.0 us)" in row
    assert not surprised and lines[-1] == "surprises: 0"
    assert main(["validation_report", str(tmp_path)]) == 0


def test_every_surprise_is_listed_and_fails_the_run(tmp_path: Path) -> None:
    doctor = [*DOCTOR, {"name": "ascend msopgen", "status": "warn", "detail": "not found"}]
    _write(tmp_path, doctor, {"l1_relu": CORRECT, "l1_gelu": LINK_ERROR, "l2_softmax": None})
    text, surprised = render(tmp_path, ["l1_relu", "l1_gelu", "l2_softmax"])
    assert surprised
    listed = text.split("surprises: ", 1)[1].splitlines()
    assert listed[0] == "3"
    assert listed[1:] == [
        "  - doctor: ascend msopgen: warn: not found",
        "  - l1_gelu: compile compile_error: :0: undefined symbol: rtKernelLaunchWithHandleV2",
        "  - l2_softmax: no report (error: the NPU runtime did not start)"]
    assert main(["validation_report", str(tmp_path), "l1_relu", "l1_gelu", "l2_softmax"]) == 1


def test_a_kernel_that_verifies_but_is_never_timed_is_a_surprise(tmp_path: Path) -> None:
    _write(tmp_path, DOCTOR, {"l1_relu": {**CORRECT, "profile": None}})
    text, surprised = render(tmp_path, ["l1_relu"])
    assert surprised and "l1_relu: compiled but profile did not run" in text


def test_the_script_refuses_an_unprepared_host_in_one_line(tmp_path: Path, standin_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_")}
    env.update(PATH="/usr/bin:/bin", REPORT_DIR=str(tmp_path / "report"), PYTHON=sys.executable)
    done = subprocess.run(["bash", "scripts/validate_ascend.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "validate_ascend: ASCEND_HOME_PATH is not set: source <CANN>/set_env.sh first (docs/ascend.md)"]
    env["ASCEND_HOME_PATH"] = str(standin_home)  # CANN, but no driver: npu-smi is missing
    done = subprocess.run(["bash", "scripts/validate_ascend.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and "npu-smi is not on PATH" in done.stderr and done.stdout == ""
