"""Adversarial kernels (issue 9): each attack class must fail against the cpu backend.

One kernel per attack in tests/tools/attacks/, each a genuine attempt: names of forbidden calls hidden from a
source scan (token pasting, #pragma redefine_extname, function pointers, weakref, computed includes, fopen64,
raw syscalls, inline assembly), honest answers wherever that hides the cheat. What "fails" means, per class:

- a cheat (forged records, timing tricks, a library doing the work, modified inputs) is never judged correct;
- an attempt on the host (files, shell, network, signals, namespaces, secrets) is refused at compile time
  (`forbidden` / `compile_error`) or runs without any effect: no marker file, no connection, the processes
  alive, no secret or host file text anywhere in what comes back (logs, messages, stderr tails, mismatch
  values decoded as characters);
- containment: the wall limit holds whatever the kernel does to its pipes, no process of the candidate
  outlives the call, a memory bomb is `oom`, and the backend still judges an honest kernel correctly after
  every attack.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelsage.tasks.loaders import LoadReport, find_task
from kernelsage.tasks.model import Task
from kernelsage.tools.backend import KernelBackend, get_backend
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Candidate, Evaluation, Record, Status, VerifyResult
from kernelsage.tools.sandbox import Limits

ATTACKS = Path(__file__).resolve().parent / "attacks"
KERNELS = Path(__file__).resolve().parent / "kernels"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"
SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "suite"

CANARY = "sk-attack-canary"  # every fake secret starts with it
SECRETS = {"KERNELSAGE_TEST_SECRET_TOKEN": "sk-attack-canary-1234",
           "OPENAI_API_KEY": "sk-attack-canary-1234-openai"}
RUN = uuid.uuid4().hex[:10]
MARKER = f"ks_attack_marker_{RUN}"
REFUSED = (Status.FORBIDDEN, Status.COMPILE_ERROR)


def host_file_lines() -> list[str]:
    """Lines of the host's /etc/passwd that must never come back (the first two, e.g. 'root:x:0:0:...')."""
    try:
        lines = [line for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") >= 6]
    except OSError:
        lines = []
    return lines[:2] or ["root:x:0:0"]


HOST_LINES = host_file_lines()


# helpers ----------------------------------------------------------------------------------------------------

def attack(name: str, **defines: str | int) -> str:
    """The source of an attack kernel, with the test's values (marker names, a port) defined in front."""
    head = "".join(f"#define KS_{key.upper()} {json.dumps(value)}\n" for key, value in defines.items())
    return head + (ATTACKS / f"{name}.cpp").read_text()


def decoded_mismatches(verify: VerifyResult | dict[str, Any] | None) -> str:
    """The 'actual' values of every reported mismatch read as character codes, in call order."""
    if verify is None:
        return ""
    data = verify.to_dict() if isinstance(verify, VerifyResult) else verify
    chars = []
    for case in data.get("cases", []):
        for mismatch in case.get("mismatches", []):
            value = mismatch.get("actual")
            if isinstance(value, (int, float)) and 0 < value < 256 and float(value).is_integer():
                chars.append(chr(int(value)))
    return "".join(chars)


def everything(*records: Record | dict[str, Any] | None) -> str:
    """All text a result carries (its JSON) plus its mismatch values decoded as characters."""
    parts = []
    for record in records:
        if record is None:
            continue
        data = record.to_dict() if isinstance(record, Record) else record
        parts.append(json.dumps(data))
        verify = data.get("verify") if isinstance(data, dict) else None
        parts.append(decoded_mismatches(verify))
        if isinstance(record, VerifyResult):
            parts.append(decoded_mismatches(record))
    return "\n".join(parts)


def assert_nothing_leaked(*records: Record | dict[str, Any] | None) -> None:
    text = everything(*records)
    secret_leaked = CANARY in text
    assert not secret_leaked, "a secret from the host environment came back in a result"
    host_file_leaked = any(line in text for line in HOST_LINES)
    assert not host_file_leaked, "a line of the host's /etc/passwd came back in a result"


def evaluate(backend: KernelBackend, task: Task, source: str) -> Evaluation:
    """compile -> verify -> profile; every result is also checked for leaked secrets and host files."""
    evaluation = evaluate_candidate(backend, task, {"kernel.cpp": source})
    assert_nothing_leaked(evaluation)
    return evaluation


def verdict(evaluation: Evaluation) -> str:
    parts = [f"status={evaluation.status.value}", f"correct={evaluation.correct}"]
    if evaluation.profile is not None:
        parts.append(f"speedup={evaluation.profile.speedup:.3g}")
    message = (evaluation.verify.message if evaluation.verify else "") or evaluation.compile.reason
    return " ".join(parts) + (f" ({message[:200]})" if message else "")


def assert_honest_verdicts(backend: KernelBackend, relu32: Task) -> None:
    """The backend still works: an honest kernel is correct, a wrong one is wrong."""
    honest = backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": (EXAMPLES / "l1_relu.cpp").read_text()}))
    assert honest.ok, honest.log
    assert "poisoned" not in honest.log
    verified = backend.verify(honest.artifact, relu32)
    assert verified.correct and verified.status is Status.OK, (verified.status, verified.message)
    wrong = backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": (KERNELS / "wrong_result.cpp").read_text()}))
    assert wrong.ok, wrong.log
    result = backend.verify(wrong.artifact, relu32)
    assert not result.correct and result.status is Status.WRONG_RESULT, (result.status, result.message)


def processes_tagged(tag: str) -> list[int]:
    """Pids of processes whose name (comm) or command line contains `tag`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            comm = (entry / "comm").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if tag in comm or tag in cmdline:
            found.append(int(entry.name))
    return found


def survivors(tag: str, grace_s: float = 2.0) -> list[int]:
    """Processes tagged `tag` still alive `grace_s` after the call (zombies awaiting reaping count as gone)."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = [pid for pid in processes_tagged(tag) if not _zombie(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].startswith(("Z", "X"))


def kill_tagged(tag: str) -> None:
    """Clean up after a defence that failed: end what the attack left behind, one pid at a time."""
    for pid in processes_tagged(tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# fixtures ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secret_environment() -> Iterator[None]:
    """Fake secrets in this process's environment before any backend starts."""
    saved = {name: os.environ.get(name) for name in SECRETS}
    os.environ.update(SECRETS)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def new_backend(cache: Path, **limits: Any) -> KernelBackend:
    return get_backend("cpu", cache_dir=cache, trials=2, reps=20, warmup=2,
                       run_limits=Limits(**{"wall_s": 10, "cpu_s": 20, **limits}))


@pytest.fixture
def backend(tmp_path: Path, secret_environment: None) -> Iterator[KernelBackend]:
    """A fresh backend (worker and build cache) per attack, so one attack's damage cannot hide another's."""
    instance = new_backend(tmp_path / "attack-builds")
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def matmul(builtin: LoadReport) -> Task:
    return find_task(builtin, "l3_matmul")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on the host's loopback that no kernel may reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.setblocking(False)
    yield server
    server.close()


def connections(server: socket.socket) -> int:
    time.sleep(0.3)
    count = 0
    while True:
        try:
            connection, _ = server.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


# 1. forged verdicts -----------------------------------------------------------------------------------------

def test_forged_case_and_result_records_are_not_believed(backend, relu32):
    evaluation = evaluate(backend, relu32, attack("forge_verify"))
    assert not evaluation.correct, verdict(evaluation)
    # it exits on its first call without computing anything: a verified case can only be a forged one
    assert evaluation.verify is None or not evaluation.verify.correct, verdict(evaluation)
    assert_honest_verdicts(backend, relu32)


def test_forged_profile_result_is_not_believed(backend, relu32):
    evaluation = evaluate(backend, relu32, attack("forge_profile"))
    assert not evaluation.correct, verdict(evaluation)
    profile = evaluation.profile
    if profile is not None:
        assert profile.candidate is None or profile.candidate.mean != pytest.approx(1.234e-9), verdict(evaluation)
        assert profile.speedup < 1000, verdict(evaluation)
    assert_honest_verdicts(backend, relu32)


# 2. timing cheats -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "timing_first_call",        # work on the first call of the large input only
    "timing_loop_detect",       # skips the work once calls come fast and often
    "timing_late_std_thread",   # a detached std::thread finishes the output after the call returned
    "timing_late_pthread",      # the same through pthread_create
    "timing_pointer_cache",     # returns at once for buffers it has filled before
    "timing_reference_scan",    # copies the reference output found in its own process's memory
])
def test_timing_cheat_is_not_judged_correct(backend, relu32, name):
    evaluation = evaluate(backend, relu32, attack(name))
    assert not evaluation.correct, verdict(evaluation)
    if name == "timing_reference_scan":
        # it never computes relu: a verified case means the reference output was in its process
        assert evaluation.verify is None or not evaluation.verify.correct, verdict(evaluation)


# 3. a library does the work ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["library_dlsym_sgemm", "library_weak_sgemm"])
def test_calling_a_blas_already_in_the_process_is_not_judged_correct(backend, matmul, name):
    evaluation = evaluate(backend, matmul, attack(name))
    assert not evaluation.correct, verdict(evaluation)


# 4. modified inputs -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "inputs_zeroed",          # zeroes x and y: relu(0) = 0
    "inputs_in_place",        # |x| into y and into x: relu(|x|) = |x|
    "inputs_slow_reference",  # correct y, then x full of subnormals and NaNs to slow the reference down
])
def test_a_kernel_that_modifies_its_inputs_is_not_judged_correct(backend, relu32, name):
    evaluation = evaluate(backend, relu32, attack(name))
    assert not evaluation.correct, verdict(evaluation)


# 5. escape and host access ----------------------------------------------------------------------------------

def test_host_files_do_not_come_back(backend, relu32):
    evaluation = evaluate(backend, relu32, attack("host_read_files"))  # evaluate() checks for the leak
    assert not evaluation.correct, verdict(evaluation)


def test_secrets_in_this_process_environment_do_not_come_back(backend, relu32):
    evaluation = evaluate(backend, relu32, attack("host_read_environ"))
    assert evaluation.status is not Status.HARNESS_ERROR, verdict(evaluation)


def _marker_locations(cache: Path) -> list[Path]:
    places = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/root"), Path.home()]
    if os.environ.get("KERNELSAGE_CACHE"):
        places += [Path(os.environ["KERNELSAGE_CACHE"]), Path(os.environ["KERNELSAGE_CACHE"]) / "cpu-builds"]
    if Path("/home").is_dir():
        places += [p for p in Path("/home").iterdir() if p.is_dir()]
    found = [place / MARKER for place in places if (place / MARKER).exists()]
    found += list(cache.rglob(f"{MARKER}*"))
    found += [p for place in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")) for p in place.glob(f"{MARKER}*")]
    return sorted(set(found))


def _remove(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def test_files_outside_the_working_directory_are_not_written(backend, relu32):
    cache = Path(backend.cache_dir)
    evaluation = evaluate(backend, relu32, attack("host_write_files", marker=MARKER))
    written = _marker_locations(cache)
    _remove(written)
    assert written == [], f"the kernel wrote {[str(p) for p in written]} ({verdict(evaluation)})"
    assert evaluation.status is not Status.HARNESS_ERROR, verdict(evaluation)


@pytest.mark.parametrize(("name", "suffix"), [
    ("host_shell_system", "system"),    # system() by token pasting
    ("host_shell_popen", "popen"),      # popen() under #pragma redefine_extname
    ("host_fork_exec", "fork"),         # fork + execve through function pointers
    ("host_raw_syscall", "syscall"),    # syscall(SYS_openat, ...) by number
    ("host_inline_asm", "asm"),         # the syscall instruction in token-pasted inline assembly
])
def test_shells_and_raw_system_calls_leave_no_trace_on_the_host(backend, relu32, name, suffix):
    marker = Path("/tmp") / f"{MARKER}-{suffix}"
    try:
        evaluation = evaluate(backend, relu32, attack(name, marker=MARKER))
        assert not marker.exists(), f"{marker} was created ({verdict(evaluation)})"
        assert evaluation.status is not Status.HARNESS_ERROR, verdict(evaluation)
    finally:
        _remove([marker])


@pytest.mark.parametrize("name", ["host_tcp_connect", "host_setns_escape"])
def test_no_connection_reaches_a_host_listener(backend, relu32, listener, name):
    evaluation = evaluate(backend, relu32, attack(name, port=listener.getsockname()[1]))
    arrived = connections(listener)
    assert arrived == 0, f"{arrived} connection(s) from the kernel reached the host ({verdict(evaluation)})"
    assert evaluation.status is not Status.HARNESS_ERROR, verdict(evaluation)


CLI = """\
import json, sys
from pathlib import Path
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.backend import get_backend
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Candidate
from kernelsage.tools.sandbox import Limits

job = json.loads(Path(sys.argv[1]).read_text())
task = find_task(load_suite(job["suite"]), job["task"])
backend = get_backend("cpu", cache_dir=job["cache"], trials=2, reps=20, warmup=2,
                      run_limits=Limits(wall_s=10, cpu_s=20))
results = {}
for name, source in job["kernels"]:
    try:
        compiled = backend.compile(Candidate(task_id=task.id, files={"kernel.cpp": source}))
        results[name] = {"compile": compiled.to_dict(),
                         "evaluation": evaluate_candidate(backend, task, {"kernel.cpp": source}).to_dict()}
    except Exception as exc:
        results[name] = {"exception": f"{type(exc).__name__}: {exc}"}
    Path(job["out"]).write_text(json.dumps(results))
backend.close()
print("cli-done", flush=True)
"""


def run_cli(tmp_path: Path, kernels: list[tuple[str, str]], timeout: float = 600) -> tuple[int, str, dict]:
    """Run kernels through a separate 'CLI' process started with API keys in its environment, as a user would."""
    script = tmp_path / "kernelsage_attack_cli.py"
    script.write_text(CLI)
    out = tmp_path / "results.json"
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"suite": str(SUITE), "task": "relu32", "cache": str(tmp_path / "cli-builds"),
                               "kernels": kernels, "out": str(out)}))
    env = {**os.environ, **SECRETS, "DATABASE_URL": "postgresql://app:sk-attack-canary-db@localhost/app"}
    completed = subprocess.run([sys.executable, str(script), str(job)], env=env, cwd=tmp_path, capture_output=True,
                               text=True, timeout=timeout, check=False)
    results = json.loads(out.read_text()) if out.is_file() else {}
    return completed.returncode, completed.stdout, results


def test_secrets_of_the_cli_and_other_processes_do_not_come_back(tmp_path):
    returncode, stdout, results = run_cli(tmp_path, [
        ("host_read_environ", attack("host_read_environ")),
        ("compile_include_environ", attack("compile_include_environ")),
        ("host_read_files", attack("host_read_files")),
    ])
    assert returncode == 0 and "cli-done" in stdout, f"the CLI ended with {returncode}"
    for name, result in results.items():
        assert "exception" not in result, f"{name}: {result.get('exception')}"
        assert_nothing_leaked(result["compile"], result["evaluation"])


def test_the_cli_the_worker_and_other_processes_cannot_be_killed(tmp_path):
    victim_name = f"ks-attack-victim-{RUN}"
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", victim_name])
    try:
        returncode, stdout, results = run_cli(tmp_path, [
            ("host_kill", attack("host_kill", victim=victim_name)),
            ("honest", (EXAMPLES / "l1_relu.cpp").read_text()),
        ])
        assert victim.poll() is None, "an unrelated process was killed"
        assert returncode == 0 and "cli-done" in stdout, f"the CLI was killed or failed (exit code {returncode})"
        assert "exception" not in results.get("host_kill", {}), results["host_kill"]["exception"]
        honest = results["honest"]
        assert "exception" not in honest, honest.get("exception")
        assert honest["evaluation"]["correct"], honest["evaluation"]["status"]
    finally:
        victim.kill()
        victim.wait()


# 6. compile-time leaks --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["compile_include_passwd", "compile_include_computed", "compile_include_environ"])
def test_includes_of_host_files_do_not_leak_through_the_compiler(backend, name):
    compiled = backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": attack(name)}))
    assert_nothing_leaked(compiled)


def test_incbin_of_a_host_file_does_not_leak(backend, relu32):
    evaluation = evaluate(backend, relu32, attack("compile_incbin"))  # evaluate() checks for the leak
    assert not evaluation.correct, verdict(evaluation)


# 7. containment ---------------------------------------------------------------------------------------------

@pytest.fixture
def short_backend(tmp_path: Path, secret_environment: None, relu32: Task) -> Iterator[KernelBackend]:
    """A backend with a 5 s wall-clock limit, warmed up by an honest kernel so timings exclude its start."""
    instance = new_backend(tmp_path / "short-builds", wall_s=5)
    assert_honest_verdicts(instance, relu32)
    yield instance
    instance.close()


def test_closed_pipes_and_a_long_sleep_end_as_timeout_near_the_wall_limit(short_backend, relu32):
    compiled = short_backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": attack("contain_close_fds_sleep")}))
    if compiled.status in REFUSED:
        return
    started = time.monotonic()
    result = short_backend.verify(compiled.artifact, relu32)
    elapsed = time.monotonic() - started
    assert result.status is Status.TIMEOUT, (result.status, result.message)
    assert elapsed < 5 + 10, f"the call took {elapsed:.1f} s for a wall limit of 5 s"
    assert_honest_verdicts(short_backend, relu32)


@pytest.mark.parametrize(("name", "prefix"), [("contain_setsid_daemon", "ksd"), ("contain_fork_bomb", "ksb")])
def test_no_process_of_the_candidate_outlives_the_call(short_backend, relu32, name, prefix):
    tag = f"{prefix}{RUN}"[:15]  # made here, not in the test's id: parallel workers must collect the same ids
    try:
        started = time.monotonic()
        evaluation = evaluate(short_backend, relu32, attack(name, tag=tag))
        elapsed = time.monotonic() - started
        left = survivors(tag)
        assert left == [], f"{len(left)} process(es) of the candidate survived the call ({verdict(evaluation)})"
        assert evaluation.status is not Status.HARNESS_ERROR, verdict(evaluation)
        assert elapsed < 3 * (5 + 10), f"the evaluation took {elapsed:.1f} s"
    finally:
        kill_tagged(tag)
    assert_honest_verdicts(short_backend, relu32)


def test_memory_bomb_is_out_of_memory_and_the_caller_survives(tmp_path, secret_environment, relu32):
    with new_backend(tmp_path / "builds", wall_s=20, cpu_s=40, memory_bytes=256 << 20) as small:
        compiled = small.compile(Candidate(task_id="relu32", files={"kernel.cpp": attack("contain_memory_bomb")}))
        assert compiled.ok or compiled.status in REFUSED, compiled.log
        if compiled.ok:
            result = small.verify(compiled.artifact, relu32)
            assert result.status is Status.OOM, (result.status, result.message)
            assert_nothing_leaked(result)
        assert_honest_verdicts(small, relu32)


# 8. cache poisoning -----------------------------------------------------------------------------------------

def test_a_kernel_cannot_poison_other_cached_builds(tmp_path, secret_environment, relu32):
    cache = tmp_path / "builds"
    with new_backend(cache) as fresh:
        assert_honest_verdicts(fresh, relu32)  # both builds are now in the cache
        evaluation = evaluate(fresh, relu32, attack("cache_poison", marker=MARKER))
        assert_honest_verdicts(fresh, relu32)  # compiled again: from the cache, and still honest
        written = list(cache.rglob(f"{MARKER}*"))
        assert written == [], f"the kernel wrote into the build cache: {written} ({verdict(evaluation)})"
    # a new backend on the same cache (a later session) sees honest builds too
    with new_backend(cache) as later:
        assert_honest_verdicts(later, relu32)
