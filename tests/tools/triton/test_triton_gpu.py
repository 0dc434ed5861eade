"""The triton backend on a real CUDA GPU (skipped without one; scripts/validate_gpu.sh runs it on a GPU host):
a correct ReLU verified and timed by the judge's clock on fresh contents (triton's assembler running under the
runner's seccomp filter), a missed element refused, an answer replayed after two calls not credited, and the
filter's attacks that the cuda policy still refuses. The device profile's protocol itself also runs on the CPU
(test_device_profile.py)."""

from __future__ import annotations

import pytest
import torch
from tests.tools.triton.conftest import HERE, unchecked_artifact

from kernelsage.tools.results import Candidate, Status
from kernelsage.tools.sandbox import Limits

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not (torch.version.cuda and torch.cuda.is_available()), reason="needs a CUDA GPU and torch"),
]


@pytest.fixture(scope="module")
def cuda_backend(tmp_path_factory):
    from kernelsage.tools.triton.backend import TritonBackend

    backend = TritonBackend(device="cuda", cache_dir=tmp_path_factory.mktemp("triton-gpu"), trials=2, warmup=3,
                            reps=20, run_limits=Limits(wall_s=120, cpu_s=240))
    yield backend
    backend.close()


def test_a_correct_relu_is_verified_and_timed_on_the_gpu(cuda_backend, l1_relu) -> None:
    source = (HERE / "kernels" / "relu.py").read_text()
    compiled = cuda_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    verified = cuda_backend.verify(compiled.artifact, l1_relu)
    assert verified.correct, verified.message
    profiled = cuda_backend.profile(compiled.artifact, l1_relu)
    assert profiled.ok, profiled.message
    assert profiled.contents == "elementwise"
    assert profiled.candidate.reps == 20 and profiled.candidate.median > 0 and profiled.reference.median > 0
    assert profiled.candidate.ci_low <= profiled.candidate.median <= profiled.candidate.ci_high


def test_a_missed_element_is_refused_on_the_gpu(cuda_backend, l1_relu) -> None:
    source = (HERE / "kernels" / "relu_misses_last.py").read_text()
    compiled = cuda_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    verified = cuda_backend.verify(compiled.artifact, l1_relu)
    assert verified.status is Status.PARTIAL_WRITE


def test_a_replayed_answer_is_not_credited_on_the_gpu(cuda_backend, l1_relu, tmp_path) -> None:
    """Honest on its first two calls of a shape, then a copy of the kept answer (it would fool the source check)."""
    profiled = cuda_backend.profile(unchecked_artifact((HERE / "attacks" / "replay_after_two.py").read_text(),
                                                       tmp_path), l1_relu)
    assert not profiled.ok and profiled.status in (Status.CACHED_RESULT, Status.WRONG_RESULT), profiled.message


@pytest.mark.parametrize(("attack", "marker", "value"), [
    ("host_kill_parent.py", None, None), ("host_ctypes_syscall.py", "@CALL@", "socket"),
    ("host_ctypes_syscall.py", "@CALL@", "unshare_user"), ("host_ctypes_syscall.py", "@CALL@", "ptrace_parent")])
def test_the_seccomp_filter_refuses_on_the_gpu(cuda_backend, l1_relu, tmp_path, attack, marker, value) -> None:
    """On cuda the filter lets triton run ptxas (fork, exec) but refuses the rest as on the interpreter."""
    source = (HERE / "attacks" / attack).read_text()
    if marker:
        source = source.replace(marker, value)
    verified = cuda_backend.verify(unchecked_artifact(source, tmp_path), l1_relu)
    assert verified.status is Status.RUNTIME_ERROR and "Operation not permitted" in verified.message, verified.message
