"""The cpu backend end to end: real g++, real sandboxed children, reference kernels and broken ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task
from kernelsage.tools.results import Candidate, Status

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"
KERNELS = Path(__file__).resolve().parent / "kernels"


@pytest.mark.parametrize("task_id", ["l1_relu", "l2_add_rms_norm", "l2_softmax", "l3_matmul", "l3_topk"])
def test_reference_kernels_compile_verify_and_profile(cpu_backend, builtin, build, task_id):
    task = find_task(builtin, task_id)
    compiled = build(task_id, EXAMPLES / f"{task_id}.cpp")
    assert compiled.ok, compiled.log
    assert compiled.artifact is not None and Path(compiled.artifact.path).is_file()

    verified = cpu_backend.verify(compiled.artifact, task)
    assert verified.correct, verified.message
    assert verified.status is Status.OK
    # every case, in every trial, was run and compared
    assert {(c.case, c.trial) for c in verified.cases} == {
        (case.name, trial) for case in task.cases for trial in range(cpu_backend.trials)}
    assert all(c.passed and c.n_mismatch == 0 and c.n_elements > 0 for c in verified.cases)

    profiled = cpu_backend.profile(compiled.artifact, task)
    assert profiled.ok and profiled.output_correct, profiled.message
    assert profiled.case == task.perf_case.name
    assert profiled.candidate.reps == cpu_backend.reps and profiled.reference.reps == cpu_backend.reps
    assert profiled.speedup == pytest.approx(profiled.reference.mean / profiled.candidate.mean)
    assert profiled.fresh_inputs == (task_id != "l3_topk")  # top-k's integer indices cannot be blended


def test_second_compile_of_the_same_source_comes_from_the_cache(build):
    first = build("l1_relu", EXAMPLES / "l1_relu.cpp")
    again = build("l1_relu", EXAMPLES / "l1_relu.cpp")
    assert first.ok and again.ok and again.cached
    assert again.artifact == first.artifact


def test_compile_error_is_parsed_with_its_line(build):
    result = build("relu32", "compile_error.cpp")
    assert not result.ok and result.status is Status.COMPILE_ERROR
    errors = [e for e in result.errors if e.severity == "error"]
    assert errors and errors[0].file == "kernel.cpp" and errors[0].line == 6
    assert "undeclared_value" in errors[0].message


def test_missing_entry_point_fails_at_build_time(build):
    result = build("relu32", "missing_entry.cpp")
    assert result.status is Status.COMPILE_ERROR
    assert "ks_kernel" in result.log


def test_forbidden_call_is_rejected_with_its_reason(build):
    result = build("relu32", "forbidden_call.cpp")
    assert result.status is Status.FORBIDDEN and result.artifact is None
    assert "spawns a process" in result.reason and result.errors[0].line == 7


def test_candidate_with_two_sources_is_refused(cpu_backend):
    result = cpu_backend.compile(Candidate(task_id="relu32", files={"a.cpp": "", "b.cpp": ""}))
    assert result.status is Status.COMPILE_ERROR and "exactly one" in result.log


@pytest.mark.parametrize(("kernel", "status"), [
    ("wrong_result.cpp", Status.WRONG_RESULT),
    ("partial_write.cpp", Status.PARTIAL_WRITE),
    ("nan_result.cpp", Status.NAN_INF),
    ("cached_result.cpp", Status.CACHED_RESULT),
    ("nonzero_return.cpp", Status.RUNTIME_ERROR),
    ("segfault.cpp", Status.RUNTIME_ERROR),
    ("abort_call.cpp", Status.RUNTIME_ERROR),
    ("infinite_loop.cpp", Status.TIMEOUT),
])
def test_wrong_and_crashing_kernels_are_classified_and_the_caller_survives(cpu_backend, relu32, build, kernel,
                                                                          status):
    compiled = build("relu32", kernel)
    assert compiled.ok, compiled.log
    result = cpu_backend.verify(compiled.artifact, relu32)
    assert not result.correct
    assert result.status is status, (result.message, result.stderr_tail)
    failure = result.first_failure()
    assert failure is not None and failure.status is status
    if status not in (Status.RUNTIME_ERROR, Status.TIMEOUT):
        assert failure.mismatches, "the first mismatching elements are reported"
        first = failure.mismatches[0]
        assert len(first.index) == len(relu32.cases[[c.name for c in relu32.cases].index(failure.case)]["shape"])


def test_partial_write_reports_the_unwritten_tail(cpu_backend, relu32, build):
    result = cpu_backend.verify(build("relu32", "partial_write.cpp").artifact, relu32)
    failure = result.first_failure()
    n = failure.n_elements
    assert failure.n_unwritten == n // 4
    assert failure.mismatches[0].index == [n - n // 4]


def test_cached_result_passes_the_first_trial_and_fails_a_later_one(cpu_backend, relu32, build):
    result = cpu_backend.verify(build("relu32", "cached_result.cpp").artifact, relu32)
    assert all(c.passed for c in result.cases if c.trial == 0)
    assert result.first_failure().trial == 1


def test_memory_bomb_is_classified_as_out_of_memory(small_memory_backend, relu32):
    compiled = small_memory_backend.compile(
        Candidate(task_id="relu32", files={"kernel.cpp": (KERNELS / "memory_bomb.cpp").read_text()}))
    result = small_memory_backend.verify(compiled.artifact, relu32)
    assert result.status is Status.OOM, (result.message, result.stderr_tail)
    assert "256 MiB" in result.message


def test_profile_of_a_crashing_kernel_is_classified(cpu_backend, relu32, build):
    result = cpu_backend.profile(build("relu32", "segfault.cpp").artifact, relu32)
    assert not result.ok and result.status is Status.RUNTIME_ERROR
    assert "SIGSEGV" in result.message
