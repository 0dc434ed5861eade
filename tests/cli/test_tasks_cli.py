"""`kernelsage tasks list` and `kernelsage check`, through the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
