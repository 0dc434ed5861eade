"""The triton backend on the interpreter, end to end: the command line accepts a correct ReLU and refuses
borrowed compute and a missed element; the shipped reference kernels pass under the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.tools.triton.conftest import HERE, unchecked_artifact

from kernelsage.tools.results import Candidate, Status
from kernelsage.tools.triton.backend import untimed_profile
from kernelsage.tools.triton.devices import choose_device, device_status

REPO = HERE.parents[2]
KERNELSAGE = Path(sys.executable).with_name("kernelsage")


def run_check(source: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KERNELSAGE), "check", "--backend", "triton", "--device", "interpret", "--task", "l1_relu",
         "--source", str(source), *options], capture_output=True, text=True, timeout=600, check=False)


def check(source: Path) -> tuple[int, dict]:
    completed = run_check(source, "--json")
    return completed.returncode, json.loads(completed.stdout)


def test_check_accepts_a_correct_relu_and_gives_it_no_time_and_no_speed_credit() -> None:
    code, report = check(HERE / "kernels" / "relu.py")
    assert (code, report["status"], report["correct"]) == (0, "ok", True), report
    assert report["latency"] is None and report["reference_latency"] is None
    profile = report["profile"]
    assert profile["timed"] is False and profile["speedup"] is None
    assert profile["candidate"] is None and profile["reference"] is None
    assert "not timed" in profile["message"]


def test_check_says_the_interpreter_does_not_time_and_prints_no_time() -> None:
    completed = run_check(HERE / "kernels" / "relu.py")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    text = " ".join(completed.stdout.split())  # the table may wrap
    assert "not timed: the interpreter checks correctness only" in text
    assert " ms" not in text and "speedup" not in text


def test_check_refuses_torch_relu_before_running_it() -> None:
    code, report = check(HERE / "kernels" / "relu_torch.py")
    assert (code, report["status"]) == (1, "forbidden")
    assert "torch.relu" in report["compile"]["reason"] and report["verify"] is None


def test_check_refuses_a_kernel_that_misses_the_last_element() -> None:
    code, report = check(HERE / "kernels" / "relu_misses_last.py")
    assert (code, report["status"]) == (1, "partial_write")
    failure = next(case for case in report["verify"]["cases"] if not case["passed"])
    assert failure["n_unwritten"] == 1


def test_a_store_past_the_end_of_an_output_is_caught(triton_backend, l1_relu) -> None:
    source = (HERE / "kernels" / "relu_past_end.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    assert compiled.ok, compiled.log
    verified = triton_backend.verify(compiled.artifact, l1_relu)
    assert verified.status is Status.RUNTIME_ERROR and not verified.correct, verified.message
    assert "past the end of output 0" in verified.message


def test_a_tensor_method_that_computes_is_refused_even_when_the_refusal_is_caught(triton_backend, l1_relu,
                                                                                  tmp_path) -> None:
    source = (HERE / "kernels" / "relu_method_caught.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    assert compiled.status is Status.FORBIDDEN  # the grammar allows neither `try` nor a `.relu` method
    verified = triton_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)  # the run-time guard still
    assert verified.status is Status.FORBIDDEN and not verified.correct
    assert "aten.relu" in verified.message


def test_the_reference_kernels_pass_under_the_interpreter() -> None:
    completed = subprocess.run([sys.executable, str(HERE / "verify_examples.py")], capture_output=True, text=True,
                               timeout=900, check=False, cwd=REPO, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = [json.loads(line) for line in completed.stdout.splitlines()]
    assert len(results) >= 15
    assert {r["task"][:2] for r in results} == {"l1", "l2", "l3"}
    assert [r for r in results if r["status"] != "ok" or r["problems"] or r["refused"]] == []
    assert all(r["filtered"] for r in results)  # under the runner's seccomp filter


def test_devices_are_named_and_explained() -> None:
    assert choose_device("interpret") == "interpret"
    with pytest.raises(Exception, match="unknown triton device"):
        choose_device("tpu")
    assert device_status("interpret").usable
    cuda = device_status("cuda")
    assert cuda.usable or "CPU build" in cuda.detail or "no CUDA GPU" in cuda.detail


def test_an_untimed_profile_says_so(l1_relu) -> None:
    profile = untimed_profile(l1_relu)
    assert profile.ok and profile.output_correct and "not timed" in profile.message
    assert not profile.timed and profile.speedup is None and profile.candidate is None and profile.reference is None


def test_what_runs_is_what_compile_checked(triton_backend, l1_relu, tmp_path: Path) -> None:
    from kernelsage.errors import BackendError

    source = (HERE / "kernels" / "relu.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    assert compiled.ok
    unhashed = compiled.artifact.model_copy(update={"sha256": ""})
    with pytest.raises(BackendError, match="no recorded hash"):  # the judge would have no hash to check against
        triton_backend.verify(unhashed, l1_relu)
    rewritten = tmp_path / "kernel.py"  # the checked source swapped for one that borrows torch's compute
    rewritten.write_text(source.replace("def ks_kernel(", "import torch\ndef _unused():\n    return torch\n\n"
                                        "def ks_kernel(", 1))
    swapped = compiled.artifact.model_copy(update={"path": str(rewritten)})
    verified = triton_backend.verify(swapped, l1_relu)
    assert not verified.correct and "changed since it was checked" in verified.message
