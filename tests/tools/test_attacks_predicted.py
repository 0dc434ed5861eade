"""A kernel that predicts which output positions the cpu profile will check, and computes only those (issue 30,
point 1).

The attack (tests/tools/attacks/predict_positions_matmul.cpp) replays the profile's position generator from its
seed: it reads which positions were poisoned before the call, finds them in its copy of the stream, and computes
only them and the positions the next draws will check, after computing each input and output address's first
call in full. The real attack recovers the seed from torch.randn inputs; this test grants it by fixing what
`secrets.randbits` returns in this process while the attack is profiled, and bakes it into the kernel. On an
evaluator whose checks follow from that seed the attack is judged correct and many times faster than the honest
kernel; one that compares every timed call's output in full (and draws nothing from a seed the kernel could
know) must judge it wrong.

The perf case is a 512x512x512 matmul on one thread: 7-11 ms a call for the honest kernel on a 2-core machine
(about 1 ms for the attack once it predicts), 20 timed calls; the whole test takes about 5 s there.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import LoadReport, find_task
from kernelsage.tools.backend import KernelBackend, get_backend
from kernelsage.tools.results import Candidate, ProfileResult, Status
from kernelsage.tools.sandbox import Limits

ATTACK = Path(__file__).resolve().parent / "attacks" / "predict_positions_matmul.cpp"
HONEST = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples" / "l3_matmul.cpp"
SEED = 1_234_567_891  # the seed granted to the attack; below 2**31, so it is what any bit count asked returns
# CACHED_RESULT too: outputs the attack leaves uncomputed still hold an earlier call's answer, which is what the
# unseen-instance check names when it is the call that finds them
JUDGED_WRONG = {Status.WRONG_RESULT, Status.PARTIAL_WRITE, Status.CACHED_RESULT}


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelBackend]:
    """One thread on each side (a shared machine's load slows both alike) and few timed calls: the honest perf
    case is slow; the attack needs only its first calls at each address to be checked in full."""
    instance = get_backend("cpu", cache_dir=tmp_path_factory.mktemp("predict-builds"), reps=20, warmup=2,
                           threads=1, run_limits=Limits(wall_s=120, cpu_s=240))
    yield instance
    instance.close()


def describe(profile: ProfileResult) -> str:
    parts = [f"status={profile.status.value} ok={profile.ok}"]
    if profile.candidate is not None and profile.reference is not None:
        parts.append(f"candidate median={profile.candidate.median * 1e3:.2f} ms "
                     f"reference median={profile.reference.median * 1e3:.2f} ms speedup={profile.speedup:.3g}")
    return " ".join(parts) + (f" ({profile.message[:300]})" if profile.message else "")


def profiled(backend: KernelBackend, task_id: str, source: str, builtin: LoadReport) -> ProfileResult:
    compiled = backend.compile(Candidate(task_id=task_id, files={"kernel.cpp": source}))
    assert compiled.ok and compiled.artifact is not None, compiled.log or compiled.reason
    return backend.profile(compiled.artifact, find_task(builtin, task_id))


def test_kernel_computing_only_predicted_positions_is_judged_wrong(
        backend: KernelBackend, builtin: LoadReport, monkeypatch: pytest.MonkeyPatch) -> None:
    honest = profiled(backend, "l3_matmul", HONEST.read_text(), builtin)
    assert honest.ok, f"the honest l3_matmul is not ok: {describe(honest)}"
    with monkeypatch.context() as patch:
        # the module itself (the backend draws the job's seed through it, by whatever import): every caller in
        # this process gets SEED, whatever bit count it asks, while the attack is profiled
        patch.setattr(secrets, "randbits", lambda bits: SEED)
        attack = profiled(backend, "l3_matmul", f"#define KS_SEED {SEED}u\n" + ATTACK.read_text(), builtin)
    assert not attack.ok and attack.status in JUDGED_WRONG, (
        f"the attack was not judged wrong: {describe(attack)}; honest: {describe(honest)}")
