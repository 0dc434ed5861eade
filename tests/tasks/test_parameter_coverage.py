"""The built-in cases exercise every parameter (issue 30, point 5): honest kernels pass them, and hand-made
mutants of honest kernels that the earlier cases let through (eps, constants, a dropped term, ties, NaN,
tails shorter than a vector, half accumulation, overflow) are rejected by verify, in the cases made for them.

The mutants live in tests/tasks/mutants as `<task>__<mutation>.{cpp,py}`; each differs from its honest kernel
(the file `<task>.cpp` there, or the backend's shipped example) in the line or two its first comment names.
Later ones are survivors of bench/mutation.py: a k loop's last step dropped or repeated, Triton program ids
swapped, inputs rounded to half (caught by close pairs, and by values beyond half's range).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.results import Candidate
from kernelsage.tools.sandbox import Limits

MUTANTS = Path(__file__).resolve().parent / "mutants"
SRC = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools"
CPU_EXAMPLES = SRC / "cpu" / "examples"
TRITON_EXAMPLES = SRC / "triton" / "examples"
FLAT = {"flat", "flat_wide"}  # the norms' rows of tiny mean square

# mutant file -> the cases that must catch it (None: any case may; the mutant fails more than the new ones)
CPU_MUTANTS: dict[str, set[str] | None] = {
    "l2_add_rms_norm__eps_1e3": FLAT,
    "l2_add_rms_norm__eps_outside": FLAT,
    "l2_add_rms_norm__no_eps": FLAT,
    "l2_add_rms_norm__no_weight": None,
    "l2_softmax__no_max": {"large"},
    "l1_leaky_relu__slope_constant": {"odd2d", "3d", "tail"},
    "l1_argmax_lastdim__tie_last": {"ties", "ties_wide"},
    "l1_argmax_lastdim__zero_start": {"negative", "short"},  # short: now and then a row of 7 negatives
    "l1_max_lastdim__zero_start": {"negative", "single", "short"},
    "l1_max_lastdim__full_vector": {"short", "single"},
    "l2_rms_norm__half_accumulate": {"half"},
    "l3_topk__tie_unordered": {"ties", "ties_all"},
    "l1_greater__nan_true": {"special"},
    "l1_greater__tie_true": {"ties", "special"},
    "l2_relu_backward__zero_passes": None,
    "l3_matmul__k_tail_dropped": {"k_tail"},  # k = 65: the example's 64-wide k blocks leave a step of 1
    "l3_matmul__k_tail_repeated": {"k_tail"},
}
TRITON_MUTANTS: dict[str, set[str] | None] = {
    "l2_rms_norm__eps_1e3": FLAT,
    "l2_rms_norm__eps_outside": FLAT,
    "l2_softmax__no_max": {"large"},
    "l1_max_lastdim__pad_zero": {"negative", "short"},  # short: 7 values, one padded lane
    "l3_bmm__pid_swap": {"blocks"},  # 3 row blocks of 32 and 2 column blocks
    "l3_matmul__range_tail": {"k_tail"},  # k = 65: the example's 32-wide k blocks leave a step of 1
    "l1_abs_diff__half_input": {"close"},
    "l1_max_lastdim__half_input": {"huge"},
    "l2_rms_norm__half_input": {"huge"},
    "l2_rms_norm__half_weight": {"huge"},
}
HONEST_CPU = sorted({name.split("__")[0] for name in CPU_MUTANTS})


def _task_id(mutant: str) -> str:
    return mutant.split("__")[0]


@pytest.fixture(scope="module")
def suite():
    return load_suite("builtin", task_ids=sorted({_task_id(m) for m in [*CPU_MUTANTS, *TRITON_MUTANTS]}))


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuBackend]:
    backend = CpuBackend(cache_dir=tmp_path_factory.mktemp("coverage-builds"), run_limits=Limits(wall_s=10, cpu_s=30))
    yield backend
    backend.close()


def _verify_cpu(cpu: CpuBackend, suite, task_id: str, source: Path):
    compiled = cpu.compile(Candidate(task_id=task_id, files={"kernel.cpp": source.read_text()}))
    assert compiled.ok, compiled.log
    return cpu.verify(compiled.artifact, find_task(suite, task_id))


def _failed_cases(verified) -> set[str]:
    return {case.case for case in verified.cases if not case.passed}


@pytest.mark.parametrize("task_id", HONEST_CPU)
def test_the_honest_kernel_passes_every_case(cpu, suite, task_id):
    own = MUTANTS / f"{task_id}.cpp"
    verified = _verify_cpu(cpu, suite, task_id, own if own.exists() else CPU_EXAMPLES / f"{task_id}.cpp")
    assert verified.correct, (verified.message, _failed_cases(verified))


@pytest.mark.parametrize("mutant", sorted(CPU_MUTANTS))
def test_a_cpu_mutant_is_rejected_by_the_cases_made_for_it(cpu, suite, mutant):
    verified = _verify_cpu(cpu, suite, _task_id(mutant), MUTANTS / f"{mutant}.cpp")
    assert not verified.correct, f"{mutant} passed every case"
    failed, expected = _failed_cases(verified), CPU_MUTANTS[mutant]
    assert failed and (expected is None or failed <= expected), (failed, verified.message)


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("triton", reason="the triton extra is not installed")
    from kernelsage.tools.triton.backend import TritonBackend

    backend = TritonBackend(device="interpret", cache_dir=tmp_path_factory.mktemp("coverage-triton"), trials=2,
                            run_limits=Limits(wall_s=90, cpu_s=180))
    yield backend
    backend.close()


def _verify_triton(triton, suite, task_id: str, source: Path):
    compiled = triton.compile(Candidate(task_id=task_id, files={"kernel.py": source.read_text()}))
    assert compiled.ok, compiled.log
    return triton.verify(compiled.artifact, find_task(suite, task_id))


@pytest.fixture(scope="module")
def honest_triton(triton, suite):
    """Verifies a task's Triton example once per module (several mutants share it)."""
    checked: set[str] = set()

    def check(task_id: str) -> None:
        if task_id not in checked:
            honest = _verify_triton(triton, suite, task_id, TRITON_EXAMPLES / f"{task_id}.py")
            assert honest.correct, (honest.message, _failed_cases(honest))
            checked.add(task_id)
    return check


@pytest.mark.parametrize("mutant", sorted(TRITON_MUTANTS))
def test_a_triton_mutant_is_rejected_on_the_interpreter(triton, suite, honest_triton, mutant):
    task_id = _task_id(mutant)
    honest_triton(task_id)
    verified = _verify_triton(triton, suite, task_id, MUTANTS / f"{mutant}.py")
    assert not verified.correct, f"{mutant} passed every case"
    failed, expected = _failed_cases(verified), TRITON_MUTANTS[mutant]
    assert failed and (expected is None or failed <= expected), (failed, verified.message)
