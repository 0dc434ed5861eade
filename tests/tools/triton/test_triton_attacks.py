"""Hostile Triton candidates (tests/tools/triton/attacks): each is run as if it had passed the source check, so
what stops it is the sandbox, the judge and the runner's guard, not the static rules."""

from __future__ import annotations

import socket
import threading

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


def test_answers_kept_across_calls_are_caught(triton_backend, l1_relu) -> None:
    source = (ATTACKS / "cache_answers.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    assert compiled.ok, compiled.log  # it only copies memory: the source check lets it through
    verified = triton_backend.verify(compiled.artifact, l1_relu)
    assert verified.status is Status.CACHED_RESULT and not verified.correct


def test_a_kernel_that_writes_its_inputs_fails(triton_backend, l1_relu) -> None:
    source = (ATTACKS / "write_inputs.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    verified = triton_backend.verify(compiled.artifact, l1_relu)
    assert verified.status in (Status.RUNTIME_ERROR, Status.INPUT_MODIFIED) and not verified.correct
