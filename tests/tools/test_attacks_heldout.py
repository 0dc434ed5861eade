"""More adversarial kernels against the cpu backend: classes and variants beyond tests/tools/test_attacks.py.

These kernels take control of the runner process they live in, the way a determined kernel agent would:
libc functions found at run time by walking libc's own ELF tables from an allowed symbol (no forbidden symbol
for the link check to see, `ks_attack_libc.h`), raw system calls in token-pasted inline assembly, the
runner's GOT patched from a constructor, the judge's request read off the caller's stack. Each kernel makes
its cheat observable: it answers correctly only when the cheat worked, or it spins a known time on every
call that does real work, so a timing that shows less means the work was skipped. What must hold:

- answers cached on the inputs' contents (sampled or hashed) never serve a timed call;
- a library that slows the runner's answers down cannot shrink its own measured time;
- a reply the kernel forges in the runner's name is the kernel's failure, never a harness error;
- no library outside the C/C++/OpenMP runtime can be loaded, no new system-call filter installed, no other
  way out (processes, io_uring, userfaultfd, ptrace, namespaces, timers, limits, perf, keyrings...) works;
- computing only the elements the judge's poison marks, late work on a thread made without the symbol,
  inputs made writable, thread bombs, stack overflows, output floods and builds beyond the file-size limit
  end as the candidate's failure, and the backend still judges honestly afterwards;
- compile-time routes to host files (.include, #pragma GCC dependency, __has_include) find nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend, get_backend
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Candidate, CompileResult, Evaluation, Status
from kernelsage.tools.sandbox import Limits

ATTACKS = Path(__file__).resolve().parent / "attacks"
KERNELS = Path(__file__).resolve().parent / "kernels"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"
HELPERS = "ks_attack_libc.h"
CANARY = "sk-heldout-canary"
SECRETS = {"KERNELSAGE_HELDOUT_SECRET_TOKEN": f"{CANARY}-5678"}


def host_lines() -> list[str]:
    try:
        lines = [line for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 6]
    except OSError:
        lines = []
    return lines[:2] or ["root:x:0:0"]


HOST_LINES = host_lines()


def files_of(name: str, **defines: int) -> dict[str, str]:
    head = "".join(f"#define KS_{key.upper()} {value}\n" for key, value in defines.items())
    return {"kernel.cpp": head + (ATTACKS / f"{name}.cpp").read_text(), HELPERS: (ATTACKS / HELPERS).read_text()}


def assert_nothing_leaked(*records: Any) -> None:
    text = "\n".join(json.dumps(r.to_dict()) for r in records if r is not None)
    assert CANARY not in text, "a secret from the host environment came back in a result"
    assert not any(line in text for line in HOST_LINES), "a line of the host's /etc/passwd came back"


def evaluate(backend: KernelBackend, task: Task, name: str, **defines: int) -> Evaluation:
    evaluation = evaluate_candidate(backend, task, files_of(name, **defines))
    assert_nothing_leaked(evaluation)
    assert evaluation.compile.ok, f"{name} did not build: {evaluation.compile.reason or evaluation.compile.log[-500:]}"
    return evaluation


def verdict(evaluation: Evaluation) -> str:
    parts = [f"status={evaluation.status.value}", f"correct={evaluation.correct}"]
    profile = evaluation.profile
    if profile is not None and profile.candidate is not None:
        parts.append(f"candidate median={profile.candidate.median:.3g}s speedup={profile.speedup:.3g}")
    message = (evaluation.verify.message if evaluation.verify else "") or (profile.message if profile else "")
    tail = evaluation.verify.stderr_tail[-300:] if evaluation.verify else ""
    return " ".join(parts) + (f" ({message[:200]})" if message else "") + (f" [{tail}]" if tail else "")


def assert_honest_verdicts(backend: KernelBackend, relu32: Task) -> None:
    honest = backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": (EXAMPLES / "l1_relu.cpp").read_text()}))
    assert honest.ok, honest.log
    verified = backend.verify(honest.artifact, relu32)
    assert verified.correct and verified.status is Status.OK, (verified.status, verified.message)
    wrong = backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": (KERNELS / "wrong_result.cpp").read_text()}))
    result = backend.verify(wrong.artifact, relu32)
    assert result.status is Status.WRONG_RESULT, (result.status, result.message)


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelBackend]:
    """One backend for the module (fake secrets in the environment first): the attacks here leave nothing
    behind that could hide another's effect; the honest check after the resource attacks shows it."""
    saved = {name: os.environ.get(name) for name in SECRETS}
    os.environ.update(SECRETS)
    instance = get_backend("cpu", cache_dir=tmp_path_factory.mktemp("heldout-builds"), trials=2, reps=20, warmup=2,
                           run_limits=Limits(wall_s=10, cpu_s=20),
                           compile_limits=Limits(wall_s=60, cpu_s=60, file_bytes=8 << 20))  # small files: fast
    yield instance
    instance.close()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# timing ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [1, 2], ids=["sampled-key", "hashed-key"])
def test_answers_cached_on_input_contents_never_serve_a_timed_call(backend, relu32, mode):
    # the kernel spins 1 ms whenever it has not seen its input's contents before, and memcpy's otherwise
    evaluation = evaluate(backend, relu32, "timing_content_cache", mode=mode)
    assert evaluation.correct, verdict(evaluation)  # it computes honestly on every miss
    assert evaluation.profile.candidate.median >= 0.6e-3, f"timed calls hit the kernel's cache: {verdict(evaluation)}"


def test_slowing_the_runner_down_before_the_first_call_does_not_shrink_the_measured_time(backend, relu32):
    # its constructor patches the runner's read() to answer 2 ms late until the kernel runs; every call spins 0.3 ms
    evaluation = evaluate(backend, relu32, "timing_calibration_hook")
    if evaluation.correct:
        assert evaluation.profile.candidate.median >= 0.15e-3, f"the calibration was inflated: {verdict(evaluation)}"
        assert evaluation.profile.round_trip_s < 1e-3, verdict(evaluation)


def test_computing_only_the_poisoned_elements_is_not_judged_correct(backend, relu32):
    # full work on the first calls, then only where the judge's poison shows (the rest is another call's answer)
    evaluation = evaluate(backend, relu32, "timing_poison_scan")
    assert not evaluation.correct, verdict(evaluation)


def test_work_left_to_a_thread_made_without_the_symbol_is_not_judged_correct(backend, relu32):
    evaluation = evaluate(backend, relu32, "timing_late_resolved_thread")
    assert not evaluation.correct, verdict(evaluation)


# blame and forged replies -------------------------------------------------------------------------------------

def test_a_reply_forged_in_the_runners_name_is_the_kernels_failure(backend, relu32):
    evaluation = evaluate(backend, relu32, "blame_forged_error_reply")
    assert not evaluation.correct, verdict(evaluation)
    assert evaluation.status is Status.RUNTIME_ERROR, verdict(evaluation)


# escape ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "library_runtime_dlopen",   # dlopen (found in libc's tables) of any library outside the runtime
    "host_syscall_sweep",       # raw system calls out of the sandbox, from an IFUNC resolver, a constructor, the kernel
    "host_seccomp_errno_zero",  # a seccomp filter of its own faking the runner's; files for writing; fcntl
])
def test_the_sandbox_cannot_be_widened_from_inside(backend, relu32, name):
    # each answers correctly only when its way out worked
    evaluation = evaluate(backend, relu32, name)
    assert not evaluation.correct, verdict(evaluation)
    assert evaluation.status is not Status.HARNESS_ERROR, verdict(evaluation)


def test_inputs_made_writable_are_still_caught(backend, relu32):
    evaluation = evaluate(backend, relu32, "inputs_mprotect")
    assert not evaluation.correct, verdict(evaluation)
    assert evaluation.status is Status.INPUT_MODIFIED, verdict(evaluation)


# resources -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["contain_thread_bomb", "contain_stack_overflow", "contain_output_flood"])
def test_exhausting_resources_is_the_kernels_failure(backend, relu32, name):
    evaluation = evaluate(backend, relu32, name)
    assert not evaluation.correct, verdict(evaluation)
    assert evaluation.status in (Status.RUNTIME_ERROR, Status.OOM, Status.TIMEOUT), verdict(evaluation)
    assert_honest_verdicts(backend, relu32)


def test_a_build_beyond_the_file_size_limit_is_the_candidates_failure(backend, relu32):
    compiled = backend.compile(Candidate(task_id="relu32", files=files_of("contain_huge_library", blob_mib=24)))
    assert compiled.status is Status.COMPILE_ERROR, (compiled.status, compiled.log[-300:])
    left = [path for root in (Path(backend.cache_dir), Path(backend._sandbox.root))
            for path in root.rglob("*") if path.is_file() and path.stat().st_size > 1 << 20]
    assert left == [], f"the build left {left} behind"
    assert_honest_verdicts(backend, relu32)


# compile time ----------------------------------------------------------------------------------------------

def test_other_compile_time_routes_to_host_files_find_nothing(backend):
    compiled: CompileResult = backend.compile(Candidate(task_id="relu32", files=files_of("compile_host_routes")))
    assert_nothing_leaked(compiled)
    assert "KS_HOST_FILE_VISIBLE" not in compiled.log, "__has_include saw a host file"
    assert not compiled.ok, compiled.log
