"""Hostile Triton candidates (tests/tools/triton/attacks): each is run as if it had passed the source check, so
what stops it is the sandbox, the judge and the runner's guard, not the static rules."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
from tests.tools.triton.conftest import HERE, unchecked_artifact

from kernelsage.tools.results import Candidate, Status

ATTACKS = HERE / "attacks"


def test_a_candidate_that_escapes_the_guard_still_sees_nothing_of_the_host(triton_backend, l1_relu, tmp_path,
                                                                           monkeypatch) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    monkeypatch.setenv("KERNELSAGE_TEST_SECRET", "s3cr3t-value")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        threading.Thread(target=lambda: server.accept(), daemon=True).start()
        source = ((ATTACKS / "contain_escape.py").read_text().replace("@SECRET_FILE@", str(secret))
                  .replace("@SECRET_VALUE@", "s3cr3t-value").replace("@PORT@", str(server.getsockname()[1])))
        verified = triton_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)
    # The kernel computes ReLU only when every probe failed.
    assert verified.status is Status.OK and verified.correct, verified.message


def test_a_forged_success_reply_leaves_the_outputs_poisoned(triton_backend, l1_relu, tmp_path) -> None:
    verified = triton_backend.verify(unchecked_artifact((ATTACKS / "forge_reply.py").read_text(), tmp_path), l1_relu)
    assert verified.status is Status.PARTIAL_WRITE and not verified.correct


def test_answers_kept_across_calls_are_caught(triton_backend, l1_relu, tmp_path) -> None:
    source = (ATTACKS / "cache_answers.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    assert compiled.status is Status.FORBIDDEN  # the grammar refuses state kept between calls (a module dict)
    verified = triton_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)  # the judge's own defence
    assert verified.status is Status.CACHED_RESULT and not verified.correct


def test_a_kernel_that_writes_its_inputs_fails(triton_backend, l1_relu) -> None:
    source = (ATTACKS / "write_inputs.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    verified = triton_backend.verify(compiled.artifact, l1_relu)
    assert verified.status in (Status.RUNTIME_ERROR, Status.INPUT_MODIFIED) and not verified.correct


# The runner's seccomp filter (tools/triton/sandbox/syscall_filter.py). Each kernel below computes ReLU only if
# its hostile call worked; refused, the call raises and the verdict is the candidate's runtime_error. The same
# warm backend serves them all, and must still accept an honest kernel after them (the last test).
REFUSED = "Operation not permitted"


def assert_refused(verified, *, words: str = REFUSED) -> None:
    assert verified.status is Status.RUNTIME_ERROR and not verified.correct, verified.message
    assert words in verified.message, verified.message


def assert_judge_healthy(triton_backend, l1_relu) -> None:
    honest = triton_backend.compile(Candidate(task_id="l1_relu",
                                              files={"kernel.py": (HERE / "kernels" / "relu.py").read_text()}))
    after = triton_backend.verify(honest.artifact, l1_relu)
    assert after.status is Status.OK and after.correct, after.message


@pytest.mark.parametrize("probe", ["fork", "posix_spawn", "subprocess", "exec"])
def test_a_candidate_cannot_start_a_program(triton_backend, l1_relu, tmp_path, probe) -> None:
    source = (ATTACKS / "host_fork_exec.py").read_text().replace("@PROBE@", probe)
    verified = triton_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)
    assert_refused(verified)


def test_a_candidate_cannot_open_a_socket(triton_backend, l1_relu, tmp_path) -> None:
    accepted = threading.Event()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.5)

        def accept() -> None:
            with contextlib.suppress(OSError):
                server.accept()
                accepted.set()

        threading.Thread(target=accept, daemon=True).start()
        source = (ATTACKS / "host_tcp_connect.py").read_text().replace("@PORT@", str(server.getsockname()[1]))
        verified = triton_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)
    assert not accepted.is_set()
    assert_refused(verified)


def test_a_candidate_cannot_kill_its_parent(triton_backend, l1_relu, tmp_path) -> None:
    verified = triton_backend.verify(unchecked_artifact((ATTACKS / "host_kill_parent.py").read_text(), tmp_path),
                                     l1_relu)
    assert "the runner exited" not in verified.message  # refused, not done
    assert_refused(verified)
    assert_judge_healthy(triton_backend, l1_relu)


def test_a_candidate_cannot_write_outside_the_sandbox(triton_backend, l1_relu, tmp_path) -> None:
    target = tmp_path / "host" / "planted.txt"
    target.parent.mkdir()
    target.parent.chmod(0o777)  # even a folder anyone may write to is not in the sandbox's file system
    source = (ATTACKS / "host_write_outside.py").read_text().replace("@TARGET@", str(target))
    verified = triton_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)
    assert not target.exists()
    assert_refused(verified, words="Error")


@pytest.mark.parametrize("call", ["fork", "socket", "kill_parent", "unshare_user", "ptrace_parent"])
def test_a_raw_system_call_through_ctypes_is_refused(triton_backend, l1_relu, tmp_path, call) -> None:
    source = (ATTACKS / "host_ctypes_syscall.py").read_text().replace("@CALL@", call)
    verified = triton_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)
    assert_refused(verified)


def test_the_judge_serves_an_honest_kernel_after_the_attacks(triton_backend, l1_relu) -> None:
    assert_judge_healthy(triton_backend, l1_relu)
