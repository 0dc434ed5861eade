"""The judge and the runner: verdicts the candidate cannot write, timing it cannot fool, blame where it belongs."""

from __future__ import annotations

import platform
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.cpu.binaries import build_runner
from kernelsage.tools.isolation import detect, popen_options, sandboxed
from kernelsage.tools.results import Candidate, Status
from kernelsage.tools.sandbox import Limits

KERNELS = Path(__file__).resolve().parent / "kernels"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"

HARNESS_TASKS = '''
import time
import torch
from kernelsage.tasks.generators import randn
from kernelsage.tasks.model import case, define_task


def broken(x):
    raise RuntimeError("the reference exploded")


def slow(x):
    time.sleep(60)
    return torch.relu(x)


def huge(x):
    return torch.empty(1 << 42) + 1


def _x(c, g):
    return {"x": randn(c["shape"], "float32", g)}


CASES = [case("vec", shape=(1000,))]
TASKS = [define_task(id=name, level=1, category="activation", description="relu with a broken reference",
                     reference=reference, inputs=_x, cases=CASES, perf=case("perf", shape=(4096,)))
         for name, reference in (("broken_ref", broken), ("slow_ref", slow), ("huge_ref", huge))]
'''


def test_the_runner_sees_only_itself(tmp_path):
    """The runner's sandbox, exactly as the judge starts it, but running `ls` instead of ks_runner."""
    isolation = detect()
    runner, _ = build_runner(tmp_path)
    with open(runner, "rb") as executable:
        command = sandboxed(isolation, ["/bin/sh", "-c", "ls /proc | grep '^[0-9]'; ls /ks; ls /"],
                            env={"PATH": "/usr/bin:/bin"}, data_files=[(executable.fileno(), "/ks/ks_runner", 0o555)])
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60,
                              pass_fds=(executable.fileno(),), **popen_options(isolation))
    lines = done.stdout.split()
    assert done.returncode == 0, done.stderr
    assert {"1", "2"} <= set(lines) and not any(line.isdigit() and int(line) > 4 for line in lines)
    assert "ks_runner" in lines and "etc" not in lines and "home" not in lines and "root" not in lines


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the kernel uses x86-64 inline assembly")
def test_raw_system_calls_are_denied_by_the_seccomp_filter(cpu_backend, build, relu32):
    result = cpu_backend.verify(build("relu32", "raw_syscall.cpp").artifact, relu32)
    failure = result.first_failure()
    assert failure is not None and failure.status is Status.WRONG_RESULT
    assert failure.mismatches[0].index == [0] and failure.mismatches[0].actual == -1.0  # -EPERM


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the kernel uses x86-64 inline assembly")
def test_forged_replies_on_the_harness_channel_are_caught(cpu_backend, build, relu32):
    result = cpu_backend.verify(build("relu32", "forged_reply.cpp").artifact, relu32)
    assert not result.correct and result.status is Status.RUNTIME_ERROR
    assert "channel" in result.message


def test_a_write_to_the_inputs_is_detected(cpu_backend, build, relu32):
    result = cpu_backend.verify(build("relu32", "input_write.cpp").artifact, relu32)
    assert not result.correct and result.status is Status.INPUT_MODIFIED, result.message
    assert "read-only" in result.message


@pytest.mark.parametrize(("kernel", "status"), [
    ("perf_first_calls_only.cpp", Status.PARTIAL_WRITE),  # stops working once the timing loop runs
    ("perf_pointer_cache.cpp", Status.CACHED_RESULT),      # replays answers keyed on the input's address
    ("perf_one_wrong_late.cpp", Status.WRONG_RESULT),      # one element wrong per call: every output in full
])
def test_profile_checks_every_call(cpu_backend, build, relu32, kernel, status):
    compiled = build("relu32", kernel)
    assert cpu_backend.verify(compiled.artifact, relu32).correct  # honest on the small test cases
    result = cpu_backend.profile(compiled.artifact, relu32)
    assert not result.ok and not result.output_correct and result.status is status, result.message
    assert result.candidate is None and result.speedup == 0.0


def test_profile_rotates_input_sets_and_subtracts_the_round_trip(cpu_backend, build, relu32):
    result = cpu_backend.profile(build("relu32", EXAMPLES / "l1_relu.cpp").artifact, relu32)
    assert result.ok and result.output_correct, result.message
    assert 2 <= result.input_sets <= cpu_backend.profile_sets
    assert result.fresh_inputs  # relu: floating inputs and outputs, so every call gets new contents
    assert 0 < result.round_trip_s < 0.01
    for timing in (result.candidate, result.reference):
        assert timing.reps == cpu_backend.reps and timing.ci_low <= timing.median <= timing.ci_high


def _stat(pid: int) -> tuple[str, int, str]:
    """(state, parent pid, command name) of a process."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), text[text.index("(") + 1:text.rindex(")")]


def _runners_under(worker: int) -> set[int]:
    """Live processes of runner sandboxes (the outer bwrap, whose command line names the runner, and the runner)
    that descend from our worker. Sandboxes of other processes on this machine (the other pytest-xdist
    process's) do not count, whatever state their teardown is in."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or "/ks/ks_runner" not in (entry / "cmdline").read_text():
                continue
            state, pid, _ = _stat(int(entry.name))
            if state in "ZX":
                continue
            while pid > 1 and pid != worker:
                pid = _stat(pid)[1]
            if pid == worker:
                found.add(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _still_running(pids: set[int]) -> set[int]:
    """Those of `pids` that still run a runner (not ended, not a zombie, not a new process under an old pid)."""
    alive = set()
    for pid in pids:
        try:
            if "/ks/ks_runner" in Path(f"/proc/{pid}/cmdline").read_text() and _stat(pid)[0] not in "ZX":
                alive.add(pid)
        except (OSError, ValueError, IndexError):
            continue
    return alive


def test_a_timeout_kills_the_whole_sandbox_and_the_next_candidate_works(cpu_backend, build, relu32):
    stuck = build("relu32", "infinite_loop.cpp").artifact
    worker = cpu_backend._sandbox._process
    assert worker is not None
    # This job's own runner processes, named while it runs: once killed they may leave the worker's tree
    # (reparented), so they are followed by pid, not found again by ancestry.
    seen: set[int] = set()
    judged = threading.Event()

    def watch() -> None:
        while not judged.is_set():
            seen.update(_runners_under(worker.pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        result = cpu_backend.verify(stuck, relu32)
    finally:
        judged.set()
        watcher.join()
    assert result.status is Status.TIMEOUT and time.monotonic() - started < cpu_backend.run_limits.wall_s + 10
    assert seen, "the job's runner was never seen"
    # a killed sandbox is torn down in moments, slower on a busy machine; a runner that survived loops on
    deadline = time.monotonic() + 15
    while _still_running(seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _still_running(seen), "a runner survived its timeout"
    assert not list(cpu_backend._sandbox.root.glob("job-*")), "a job directory was left behind"
    assert cpu_backend.verify(build("relu32", EXAMPLES / "l1_relu.cpp").artifact, relu32).correct


def test_a_dead_worker_is_the_jobs_result_and_is_replaced(tmp_path, relu32):
    # a wall limit far past the wait for the runner: on a busy machine the runner can start late, and the
    # kill must come before the limit ends the stuck kernel (a timeout, not the dead worker this is about)
    with CpuBackend(cache_dir=tmp_path / "builds", run_limits=Limits(wall_s=180, cpu_s=360)) as backend:
        stuck = backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": (KERNELS / "infinite_loop.cpp")
                                                                   .read_text()}))
        honest = backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": (EXAMPLES / "l1_relu.cpp")
                                                                    .read_text()}))
        results = []
        job = threading.Thread(target=lambda: results.append(backend.verify(stuck.artifact, relu32)))
        job.start()
        worker = backend._sandbox._process
        assert worker is not None
        # Killed only once the job runs its kernel: a runner under this worker. Another process's sandbox must not
        # count: a kill before the job reached the worker sends it to a fresh worker, where the stuck kernel runs
        # to its wall limit.
        in_flight = time.monotonic() + 120
        while not _runners_under(worker.pid) and time.monotonic() < in_flight:
            time.sleep(0.1)
        assert _runners_under(worker.pid), "the job never started its runner"
        worker.kill()
        job.join(timeout=60)
        assert results and results[0].status is Status.HARNESS_ERROR and "worker" in results[0].message
        assert backend.verify(honest.artifact, relu32).correct


@pytest.fixture(scope="module")
def harness_suite(tmp_path_factory):
    path = tmp_path_factory.mktemp("harness_suite") / "tasks.py"
    path.write_text(HARNESS_TASKS)
    return load_suite(path)


@pytest.mark.parametrize("task_id", ["broken_ref", "huge_ref", "slow_ref"])
def test_reference_failures_are_the_harness_fault(tmp_path, build, harness_suite, task_id):
    task = find_task(harness_suite, task_id)
    limits = Limits(wall_s=5, cpu_s=20, harness_wall_s=3, harness_memory_bytes=2 << 30)
    with CpuBackend(cache_dir=tmp_path / "builds", run_limits=limits) as backend:
        compiled = backend.compile(Candidate(task_id=task.id, files={"kernel.cpp": (EXAMPLES / "l1_relu.cpp")
                                                                     .read_text()}))
        for result in (backend.verify(compiled.artifact, task), backend.profile(compiled.artifact, task)):
            assert result.status is Status.HARNESS_ERROR, (result.status, result.message)
            assert "reference" in result.message


def test_a_write_past_the_end_of_an_output_is_caught(cpu_backend, build, relu32):
    # every element of the output is right: only the guard bytes after it show the out-of-bounds write
    result = cpu_backend.verify(build("relu32", "write_past_end.cpp").artifact, relu32)
    assert not result.correct and result.status is Status.RUNTIME_ERROR, result.message
    assert "wrote outside its outputs" in result.message and "past the end of output 0" in result.message


def test_a_read_past_the_end_of_an_input_finds_nan(cpu_backend, build, builtin):
    # the bytes after every input hold NaN: a sum that reads one element too many is wrong, not lucky
    task = find_task(builtin, "l1_sum_lastdim")
    result = cpu_backend.verify(build("l1_sum_lastdim", "read_past_end.cpp").artifact, task)
    assert not result.correct and result.status is Status.NAN_INF, result.message
