"""The triton backend's device profile (tools/triton/device_profile.py), its protocol run on the CPU: the judge's
side with a stand-in for the GPU (a test double, below) and the real sandboxed runner on the interpreter. What a
GPU host adds (staging, L2 flushes, the device's clock) is in test_triton_gpu.py."""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from tests.tools.triton.conftest import HERE, unchecked_artifact

from kernelsage.tasks.model import Task
from kernelsage.tools.judging.tasks import prepare_task
from kernelsage.tools.results import Artifact, Candidate, Status
from kernelsage.tools.sandbox import Limits
from kernelsage.tools.triton.backend import TritonBackend
from kernelsage.tools.triton.device_profile import run_profile

REPO = HERE.parents[2]
REPLAY = HERE / "attacks" / "replay_after_two.py"


class CpuDeviceDouble:
    """TEST DOUBLE for a GPU or NPU: the `Accelerator` the device profile asks for, on the CPU (the reference runs
    there, nothing is left to synchronise, a small flush), so the protocol runs on a machine without a device."""

    name = "cpu"
    flush_bytes = 1 << 20

    def synchronize(self) -> None:
        """CPU work is done when the call returns."""


prepare = prepare_task  # this module serves as the job's handler module in the sandbox worker (below)


def profile_with_double(payload: dict[str, Any], task: Task, emit: Any) -> None:
    """The device profile's job with the double in place of torch.cuda, on the payload's (small) case."""
    case = next(c for c in task.cases if c.name == payload["perf_case"])
    run_profile(payload, dataclasses.replace(task, perf_case=case), emit, CpuDeviceDouble())


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonBackend]:
    """A backend whose sandbox worker can import this module (the double's handler): the repository on its path."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])))
        made = TritonBackend(device="interpret", cache_dir=tmp_path_factory.mktemp("triton-device"), trials=2,
                             run_limits=Limits(wall_s=120, cpu_s=240))
        yield made
    made.close()


def profile_on_cpu(backend: TritonBackend, task: Task, artifact: Artifact, *, warmup: int = 2,
                   reps: int = 20) -> dict[str, Any]:
    """The device profile's whole protocol in a job of the backend's worker, on l1_relu's 37 x 129 case (the
    interpreter would take minutes on the 2048 x 2048 one); its result."""
    payload = {**backend._payload(artifact, task), "seed": secrets.randbits(128), "warmup": warmup,
               "reps": reps, "perf_case": "odd2d"}
    outcome = backend._run_job("tests.tools.triton.test_device_profile:profile_with_double", payload, backend.run_limits)
    result = outcome.result()
    assert result is not None, (outcome.prepare_error, outcome.worker_error, outcome.events, outcome.stderr_tail)
    return result


def compiled(backend: TritonBackend, name: str) -> Artifact:
    result = backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": (HERE / name).read_text()}))
    assert result.ok and result.artifact is not None, result.log
    return result.artifact


def test_an_honest_kernel_is_timed_on_fresh_contents_and_unseen_instances(backend, l1_relu) -> None:
    result = profile_on_cpu(backend, l1_relu, compiled(backend, "kernels/relu.py"))
    assert result["status"] == "ok", result
    assert result["fresh_inputs"] and result["contents"] == "elementwise"
    assert result["input_sets"] >= 2 and result["unseen_calls"] >= 4
    assert result["candidate"]["reps"] == 20 and result["reference"]["reps"] == 20


# The replay keeps state in ks_kernel, which the source check refuses: it runs as if it had fooled the check, so
# what stops it is the profile.
def test_the_replay_attack_passes_verify(backend, l1_relu, tmp_path) -> None:
    """Honest in verify: each case is called twice there (two trials), below the attack's threshold."""
    verified = backend.verify(unchecked_artifact(REPLAY.read_text(), tmp_path), l1_relu)
    assert verified.status is Status.OK and verified.correct, verified.message


def test_a_kept_answer_replayed_after_two_calls_is_not_credited(backend, l1_relu, tmp_path) -> None:
    result = profile_on_cpu(backend, l1_relu, unchecked_artifact(REPLAY.read_text(), tmp_path))
    assert result["status"] == Status.CACHED_RESULT.value, result
    assert "call 3" in result["message"], result


def test_one_missed_element_fails_the_call(backend, l1_relu) -> None:
    """Every call's whole output is compared: one unwritten element of 4773 is found on the first call."""
    result = profile_on_cpu(backend, l1_relu, compiled(backend, "kernels/relu_misses_last.py"))
    assert result["status"] == Status.PARTIAL_WRITE.value and "call 1" in result["message"], result
