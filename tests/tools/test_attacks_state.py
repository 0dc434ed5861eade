"""Kernels that keep state across profile calls, against the cpu backend's timing.

The profile must time the work of new inputs, not a kernel's memory of earlier ones. Each kernel here
(tests/tools/attacks/state_*.cpp, the shared machinery in state_span.h) computes honestly whenever its state
cannot answer, and answers from its state only when that answer is right (checked on a few elements where
that is cheap), so the only way it can earn a verdict it should not is through its cheat:

- interpolation: outputs linear or quadratic in the inputs (row sums, a squared error, matmul, addmm, the
  pre-activation of linear+relu) are predicted as a combination of answers computed before, for any input in
  the span of the inputs seen (an evaluator that blends a few fixed input sets with one weight per tensor
  gives nothing else); an input off that span is computed honestly;
- replay: where the inputs repeat (integer outputs: argmax, top-k, grouped matmul's group sizes, embedding
  bags' ids), answers keyed on a few sampled elements, whole or per row;
- variants against an evaluator that mixes never-seen instances into the timed calls and compares their times
  with the others' (every kernel here is honest on those): a cheat on only part of the calls (the rest computed
  honestly, or answered and held to an honest call's time, to blur that comparison); state kept per row rather
  than per input; running per-element statistics (each element's range over the first calls bounds where a
  row's maximum can be, even under element-wise blends).

What must hold, for every attack: it ends not correct, or it is at most SLACK times faster than an honest naive
kernel of the same task (the attack's own honest path compiled alone: `KS_HONEST`) evaluated just before and
just after it, by its median and by its latency (the mean), measured relative to the reference and outright
(`gain`): the comparison is relative, and load on the shared machine moves it little. An attack that answers
from its state on only part of the calls is also held against its own build with the cheat switched off
(`KS_SHARE 0`: every call honest, the same code around the loop): the same loop compiled inside an attack ran
1.4-1.6x faster than compiled alone (argmax 4.2-4.5 ms against 6.4-6.7 ms; rowsum's held build had run
1.26-1.58x faster than its KS_HONEST build in earlier runs), a gain of code generation that a cheat held to its own honest pace inherits and that is not the cheat's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import LoadReport, find_task
from kernelsage.tools.backend import KernelBackend, get_backend
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Evaluation, Status
from kernelsage.tools.sandbox import Limits

ATTACKS = Path(__file__).resolve().parent / "attacks"
HEADER = "state_span.h"
SLACK = 1.5  # the attack's speedup may exceed the honest kernel's by this factor (noise), not more
NOT_A_VERDICT = {Status.COMPILE_ERROR, Status.FORBIDDEN, Status.HARNESS_ERROR, Status.TIMEOUT, Status.OOM,
                 Status.RUNTIME_ERROR}  # the attack (or the machine) broke: no judgement of its cheat


def files_of(name: str, **defines: int) -> dict[str, str]:
    head = "".join(f"#define KS_{key.upper()} {value}\n" for key, value in defines.items())
    return {"kernel.cpp": head + (ATTACKS / f"{name}.cpp").read_text(), HEADER: (ATTACKS / HEADER).read_text()}


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelBackend]:
    """One backend for the module: enough timed calls for a cheat that learns in its first ten or so to own the
    median (the default is 100), one thread on each side (a single-threaded kernel and reference are slowed
    alike by other load on a shared machine, two-threaded ones by stragglers, unevenly), and a wall-clock limit
    that an honest naive matmul meets on a loaded machine."""
    instance = get_backend("cpu", cache_dir=tmp_path_factory.mktemp("state-builds"), trials=2, reps=40, warmup=5,
                           threads=1, run_limits=Limits(wall_s=60, cpu_s=120))
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def full_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelBackend]:
    """The same with the default number of timed calls (100), for a kernel that learns from its first 30."""
    instance = get_backend("cpu", cache_dir=tmp_path_factory.mktemp("state-builds-full"), trials=2, reps=100,
                           warmup=5, threads=1, run_limits=Limits(wall_s=60, cpu_s=120))
    yield instance
    instance.close()


def speedup(evaluation: Evaluation, of: str = "median") -> float:
    """The reference's median time over the candidate's median (or mean) time, in one profile."""
    profile = evaluation.profile
    assert profile is not None and profile.candidate is not None and profile.reference is not None
    return profile.reference.median / max(getattr(profile.candidate, of), 1e-9)


def describe(evaluation: Evaluation) -> str:
    parts = [f"status={evaluation.status.value}", f"correct={evaluation.correct}"]
    profile = evaluation.profile
    if profile is not None and profile.candidate is not None and profile.reference is not None:
        parts.append(f"candidate median={profile.candidate.median:.3g}s mean={profile.candidate.mean:.3g}s "
                     f"reference median={profile.reference.median:.3g}s speedup={speedup(evaluation):.3g} "
                     f"(of the mean {speedup(evaluation, 'mean'):.3g})")
    message = (evaluation.verify.message if evaluation.verify else "") or (profile.message if profile else "")
    return " ".join(parts) + (f" ({message[:300]})" if message else "")


def honest(backend: KernelBackend, builtin: LoadReport, task_id: str, name: str, **defines: int) -> Evaluation:
    """The honest naive kernel of a task: the attack file's honest path alone (`KS_HONEST`), or as `defines`
    build it (`share=0`: inside the attack, the cheat never used)."""
    evaluation = evaluate_candidate(backend, find_task(builtin, task_id), files_of(name, **(defines or {"honest": 1})))
    assert evaluation.correct, f"the honest kernel of {task_id} ({name}) is not correct: {describe(evaluation)}"
    return evaluation


def gain(attack: Evaluation, honest: list[Evaluation], of: str = "median") -> float:
    """How much faster the attack was than the honest kernel, by its median (what the verdict credits: the
    median's interval against the reference's) or by its latency (`Evaluation.latency`: what the graph routes on
    and the memory learns from): relative to the reference beside it and outright, the smaller of the two (a
    cheat shows in both; load that slows one side's reference, or one run, shows in one only), against the
    better of the honest runs, taken by their medians (the honest kernel treats every call alike)."""
    profile = attack.profile
    assert profile is not None and profile.candidate is not None and profile.reference is not None
    if of == "median":
        time, reference = profile.candidate.median, profile.reference.median
    else:
        assert attack.latency is not None and attack.reference_latency is not None
        time, reference = attack.latency, attack.reference_latency
    relative = reference / max(time, 1e-9) / max(speedup(h) for h in honest)
    outright = min(h.profile.candidate.median for h in honest if h.profile and h.profile.candidate) / max(time, 1e-9)
    return min(relative, outright)


def assert_not_credited(backend: KernelBackend, builtin: LoadReport, task_id: str, name: str,
                        **defines: int) -> None:
    """The attack is judged not correct, or it is no faster than the honest kernel (run just before and just
    after it) by its median and by its latency (`gain`). The latency is the median (it was the mean, which a kernel
    fast on a minority of its calls moves)."""
    before = honest(backend, builtin, task_id, name)
    baselines = [before]
    if "share" in defines:
        baselines.append(honest(backend, builtin, task_id, name, share=0))
    attack = evaluate_candidate(backend, find_task(builtin, task_id), files_of(name, **defines))
    assert attack.compile.ok, f"{name} did not build: {attack.compile.reason or attack.compile.log[-500:]}"
    if not attack.correct:
        figures = f"{task_id} {name} {defines}: attack {describe(attack)}; honest naive {describe(before)}"
        print(figures)
        assert attack.status not in NOT_A_VERDICT, f"the attack broke instead of being judged: {figures}"
        return
    after = honest(backend, builtin, task_id, name)
    baselines.append(after)
    by_median, by_latency = gain(attack, baselines), gain(attack, baselines, "latency")
    figures = (f"{task_id} {name} {defines}: gain over honest {by_median:.3g} (by latency {by_latency:.3g}); attack "
               f"{describe(attack)}; honest naive {'; again '.join(describe(b) for b in baselines)}")
    print(figures)
    assert by_median <= SLACK, f"a cheat was credited as speed (median): {figures}"
    assert by_latency <= SLACK, f"a cheat was credited as speed (latency): {figures}"


# 1. interpolation: outputs polynomial in inputs that are blends of a few fixed sets ----------------------------

@pytest.mark.parametrize(("task_id", "name"), [
    ("l1_sum_lastdim", "state_span_rowsum"),  # linear
    ("l2_mse_loss", "state_span_mse"),        # quadratic, one scalar
    pytest.param("l3_matmul", "state_span_matmul", marks=pytest.mark.slow),  # bilinear in two blended inputs
    pytest.param("l3_addmm", "state_span_addmm", marks=pytest.mark.slow),    # quadratic + linear
    # the quadratic pre-activation kept, relu applied after
    pytest.param("l2_linear_relu", "state_span_linear_relu", marks=pytest.mark.slow),
], ids=["rowsum", "mse", "matmul", "addmm", "linear-relu"])
def test_answers_predicted_from_earlier_answers_are_not_credited(backend, builtin, task_id, name):
    assert_not_credited(backend, builtin, task_id, name)


# 2. replay: inputs repeated where they cannot be blended -----------------------------------------------------

@pytest.mark.parametrize(("task_id", "name", "defines"), [
    ("l1_argmax_lastdim", "state_replay_argmax", {}),              # the whole answer, keyed on 32 samples
    ("l1_argmax_lastdim", "state_replay_argmax", {"per_row": 1}),  # every row keyed by 4 of its elements
    ("l3_topk", "state_replay_topk", {}),                          # per row: values and indices
    ("l3_embedding_bag_sum", "state_replay_bags", {}),             # per bag, keyed by its ids (and the table)
    # the whole answer, keyed with the group sizes
    pytest.param("l3_grouped_matmul", "state_replay_grouped", {}, marks=pytest.mark.slow),
], ids=["argmax", "argmax-rows", "topk-rows", "bags", "grouped-matmul"])
def test_answers_replayed_on_repeated_inputs_are_not_credited(backend, builtin, task_id, name, defines):
    assert_not_credited(backend, builtin, task_id, name, **defines)


# 3. against never-seen instances among the timed calls -------------------------------------------------------
# Every kernel above already computes honestly on an input its state does not cover (off the span, a key never
# seen): fast on the usual calls, honest on the fresh ones. These blur or dodge a comparison of the two.

@pytest.mark.parametrize(("task_id", "name", "defines"), [
    # 58% of the answerable calls at once, the rest computed honestly: the median is still the cheat's
    ("l1_sum_lastdim", "state_span_rowsum", {"share": 58}),
    ("l1_argmax_lastdim", "state_replay_argmax", {"share": 58}),
    ("l3_topk", "state_replay_topk", {"share": 58}),
    # the same, the rest answered from the state but held to an honest call's time (no work, same look)
    ("l1_argmax_lastdim", "state_replay_argmax", {"share": 58, "pace": 100}),
    # 45% at once, the rest answered from the state and held to an honest call's time: no unseen call stands
    # out, and the mean (about 0.55 of an honest call's) is the cheat's, but the credited latency is the median,
    # the held calls'. (Held to 80%, the median gains 1/0.8 = 1.25x: within the factor the comparison with the
    # unseen calls must allow for noise, docs/security.md "Not covered", and too close to SLACK to test.)
    ("l1_argmax_lastdim", "state_replay_argmax", {"share": 45, "pace": 100}),
    ("l1_sum_lastdim", "state_span_rowsum", {"share": 45, "pace": 100}),
], ids=["rowsum-58", "argmax-58", "topk-58", "argmax-58-held", "argmax-45-held", "rowsum-45-held"])
def test_a_cheat_on_part_of_the_calls_is_not_credited(backend, builtin, task_id, name, defines):
    assert_not_credited(backend, builtin, task_id, name, **defines)


@pytest.mark.parametrize(("task_id", "name", "defines"), [
    ("l1_sum_lastdim", "state_span_rowsum", {"per_row": 1}),  # a model per row: weights per row do not stop it
    ("l2_mse_loss", "state_span_mse", {"per_row": 1}),        # the same, quadratic
], ids=["rowsum-rows", "mse-rows"])
def test_state_kept_per_row_is_not_credited(backend, builtin, task_id, name, defines):
    assert_not_credited(backend, builtin, task_id, name, **defines)


def test_running_bounds_per_element_are_not_credited(full_backend, builtin):
    # each element's range over its first 30 calls bounds where a row's maximum can be: ~20 reads a row
    assert_not_credited(full_backend, builtin, "l1_max_lastdim", "state_bounds_rowmax")
