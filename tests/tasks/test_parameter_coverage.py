"""The built-in cases exercise every parameter (issue 30, point 5): honest kernels pass them, and hand-made
mutants of honest kernels that the earlier cases let through (eps, constants, a dropped term, ties, NaN,
tails shorter than a vector, half accumulation, overflow) are rejected by verify, in the cases made for them.

Each mutant is an edit of its honest kernel (tests/tasks/kernels/<task>.cpp where the backend ships no example,
else the example), written out below with why it is wrong. Later ones are survivors of bench/mutation.py: a k
loop's last step dropped or repeated, Triton program ids swapped, inputs rounded to half (caught by close pairs,
and by values beyond half's range).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.results import Candidate
from kernelsage.tools.sandbox import Limits

KERNELS = Path(__file__).resolve().parent / "kernels"
SRC = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools"
CPU_EXAMPLES = SRC / "cpu" / "examples"
TRITON_EXAMPLES = SRC / "triton" / "examples"
FLAT = {"flat", "flat_wide"}  # the norms' rows of tiny mean square



@dataclass(frozen=True)
class Mutant:
    """An honest kernel with a few exact edits: `<task>__<mutation>.<cpp|py>`, and why the result is wrong."""

    name: str
    why: str
    edits: tuple[tuple[str, str], ...]  # (text of the honest kernel, what replaces it), each found exactly once

    def source(self, honest: str) -> str:
        for before, after in self.edits:
            assert honest.count(before) == 1, f"{self.name}: the honest kernel changed ({before.strip()!r})"
            honest = honest.replace(before, after)
        return honest


EDITS = {mutant.name: mutant for mutant in (
    Mutant('l1_abs_diff__half_input.py', 'a is rounded to float16 before the difference.',
           (('    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)\n',
                '    a = tl.load(a_ptr + offs, mask=mask).to(tl.float16)\n'),)),
    Mutant('l1_argmax_lastdim__tie_last.cpp', '>= keeps the last of equal maxima instead of the first.',
           (('            if (row[j] > best) { best = row[j]; where = j; }\n',
                '            if (row[j] >= best) { best = row[j]; where = j; }\n'),)),
    Mutant('l1_argmax_lastdim__zero_start.cpp', 'the running maximum starts at 0 (wrong for an all-negative row).',
           (('        float best = row[0];\n',
                '        float best = 0.0f;\n'),
               ('        for (int64_t j = 1; j < n; ++j)\n',
                '        for (int64_t j = 0; j < n; ++j)\n'),)),
    Mutant('l1_greater__nan_true.cpp', '!(a <= b), which is a > b except where a or b is NaN.',
           (('    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = a[i] > b[i];\n',
                '    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = !(a[i] <= b[i]);\n'),)),
    Mutant('l1_greater__tie_true.cpp', 'a >= b, which is a > b except on ties.',
           (('    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = a[i] > b[i];\n',
                '    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = a[i] >= b[i];\n'),)),
    Mutant('l1_leaky_relu__slope_constant.cpp', 'the slope is the constant 0.1 instead of the attribute.',
           (('    const float slope = (float)ks_attr_float(attrs, n_attrs, "slope", 0.1);\n',
                '    const float slope = 0.1f;\n'),)),
    Mutant('l1_max_lastdim__full_vector.cpp', 'the first 8 elements (one AVX vector) seed the maximum, as if every row held at least 8: a row shorter than a vector reads into the next row.',
           (('        float top = row[0];\n        for (int64_t j = 1; j < n; ++j) top = row[j] > top ? row[j] : top;\n',
                '        float lanes[8];\n        for (int j = 0; j < 8; ++j) lanes[j] = r * n + j < rows * n ? row[j] : row[0];  // stays inside the input\n        for (int64_t j = 8; j < n; ++j) lanes[j % 8] = row[j] > lanes[j % 8] ? row[j] : lanes[j % 8];\n        float top = lanes[0];\n        for (int j = 1; j < 8; ++j) top = lanes[j] > top ? lanes[j] : top;\n'),)),
    Mutant('l1_max_lastdim__half_input.py', 'x is rounded to float16 (inf beyond 65504).',
           (('    x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf")).to(tl.float32)\n',
                '    x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf")).to(tl.float16)\n'),)),
    Mutant('l1_max_lastdim__pad_zero.py', 'masked lanes padded with 0 instead of -inf.',
           (('    x = tl.load(x_ptr + row * n + cols, mask=mask, other=-float("inf")).to(tl.float32)\n',
                '    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)\n'),)),
    Mutant('l1_max_lastdim__zero_start.cpp', 'the running maximum starts at 0 (wrong for an all-negative row).',
           (('        float top = row[0];\n        for (int64_t j = 1; j < n; ++j) top = row[j] > top ? row[j] : top;\n',
                '        float top = 0.0f;\n        for (int64_t j = 0; j < n; ++j) top = row[j] > top ? row[j] : top;\n'),)),
    Mutant('l2_add_rms_norm__eps_1e3.cpp', 'eps is the constant 1e-3 instead of the attribute.',
           (('    const float eps = (float)ks_attr_float(attrs, n_attrs, "eps", 1e-6);\n',
                '    const float eps = 1e-3f;\n'),)),
    Mutant('l2_add_rms_norm__eps_outside.cpp', 'eps added outside the square root.',
           (('        const float scale = 1.0f / std::sqrt((float)(squares / n) + eps);\n',
                '        const float scale = 1.0f / (std::sqrt((float)(squares / n)) + eps);\n'),)),
    Mutant('l2_add_rms_norm__no_eps.cpp', 'the eps term dropped.',
           (('        const float scale = 1.0f / std::sqrt((float)(squares / n) + eps);\n',
                '        const float scale = 1.0f / std::sqrt((float)(squares / n));\n'),)),
    Mutant('l2_add_rms_norm__no_weight.cpp', 'the weight term dropped.',
           (('        for (int64_t j = 0; j < n; ++j) normed[base + j] = sum[base + j] * scale * weight[j];\n',
                '        for (int64_t j = 0; j < n; ++j) normed[base + j] = sum[base + j] * scale;\n'),)),
    Mutant('l2_relu_backward__zero_passes.cpp', 'x >= 0 passes the gradient at x = 0 too.',
           (('    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) out[i] = x[i] > 0.f ? grad[i] : 0.f;\n',
                '    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) out[i] = x[i] >= 0.f ? grad[i] : 0.f;\n'),)),
    Mutant('l2_rms_norm__eps_1e3.py', 'eps is the constant 1e-3 instead of the attribute.',
           (('    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)\n',
                '    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + 1e-3)\n'),)),
    Mutant('l2_rms_norm__eps_outside.py', 'eps added outside the square root.',
           (('    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)\n',
                '    scale = 1.0 / (tl.sqrt(tl.sum(x * x, axis=0) / n) + eps)\n'),)),
    Mutant('l2_rms_norm__half_accumulate.cpp', "float16 rows' mean square accumulated in float16 (each partial sum rounded to half).",
           (('                 n, eps, ks_half_to_float, ks_float_to_half, [](float v) { return v; });  // the sum kept in float\n',
                '                 n, eps, ks_half_to_float, ks_float_to_half, [](float v) { return ks_half_to_float(ks_float_to_half(v)); });\n'),)),
    Mutant('l2_rms_norm__half_input.py', 'x is rounded to float16 (inf beyond 65504), then computed in float32 (so rows of tiny mean square, whose squares would underflow in half, do not expose it).',
           (('    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float32)\n',
                '    x = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0).to(tl.float16).to(tl.float32)\n'),)),
    Mutant('l2_rms_norm__half_weight.py', 'the weight is rounded to float16 (inf beyond 65504).',
           (('    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n',
                '    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float16)\n'),)),
    Mutant('l2_softmax__no_max.cpp', 'no maximum subtracted (exp overflows on large rows).',
           (('        float top = in[0];\n        for (int64_t j = 1; j < n; ++j) top = in[j] > top ? in[j] : top;\n',
                '        float top = 0.0f;\n        \n'),)),
    Mutant('l2_softmax__no_max.py', 'no maximum subtracted (exp overflows on large rows).',
           (('    e = tl.exp(x - tl.max(x, axis=0))\n',
                '    e = tl.exp(x)\n'),)),
    Mutant('l3_bmm__pid_swap.py', "the row and column blocks read each other's program id.",
           (('    rows = tl.program_id(0) * BM + tl.arange(0, BM)\n    cols = tl.program_id(1) * BN + tl.arange(0, BN)\n',
                '    rows = tl.program_id(1) * BM + tl.arange(0, BM)\n    cols = tl.program_id(0) * BN + tl.arange(0, BN)\n'),)),
    Mutant('l3_matmul__k_tail_dropped.cpp', 'the k-block loop stops at k - 1 (drops the last step when k = 64j + 1).',
           (('        for (int64_t p0 = 0; p0 < k; p0 += kBlock) {\n',
                '        for (int64_t p0 = 0; p0 < k - 1; p0 += kBlock) {\n'),)),
    Mutant('l3_matmul__k_tail_repeated.cpp', "a block's end is compared with k - 1, so when k = 64j + 65 one block runs to k and the next repeats the last step.",
           (('            const int64_t p1 = p0 + kBlock < k ? p0 + kBlock : k;\n',
                '            const int64_t p1 = p0 + kBlock < k - 1 ? p0 + kBlock : k;\n'),)),
    Mutant('l3_matmul__range_tail.py', 'the k loop stops at k - 1 (drops the last block when k = 32j + 1).',
           (('    for start in range(0, k, BK):\n',
                '    for start in range(0, k - 1, BK):\n'),)),
    Mutant('l3_topk__tie_unordered.cpp', 'equal values ranked by value alone (partial_sort leaves their order open).',
           (('                return row[p] > row[q] || (row[p] == row[q] && p < q);\n',
                '                return row[p] > row[q];\n'),)),

)}

# mutant -> the cases that must catch it (None: any case may; the mutant fails more than the new ones)
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


def _honest(task_id: str, suffix: str) -> Path:
    own = KERNELS / f"{task_id}{suffix}"
    return own if own.exists() else (CPU_EXAMPLES if suffix == ".cpp" else TRITON_EXAMPLES) / f"{task_id}{suffix}"


def _mutant(name: str, suffix: str) -> str:
    return EDITS[name + suffix].source(_honest(_task_id(name), suffix).read_text())


def _verify_cpu(cpu: CpuBackend, suite, task_id: str, source: str):
    compiled = cpu.compile(Candidate(task_id=task_id, files={"kernel.cpp": source}))
    assert compiled.ok, compiled.log
    return cpu.verify(compiled.artifact, find_task(suite, task_id))


def _failed_cases(verified) -> set[str]:
    return {case.case for case in verified.cases if not case.passed}


@pytest.mark.parametrize("task_id", HONEST_CPU)
def test_the_honest_kernel_passes_every_case(cpu, suite, task_id):
    verified = _verify_cpu(cpu, suite, task_id, _honest(task_id, ".cpp").read_text())
    assert verified.correct, (verified.message, _failed_cases(verified))


@pytest.mark.parametrize("mutant", sorted(CPU_MUTANTS))
def test_a_cpu_mutant_is_rejected_by_the_cases_made_for_it(cpu, suite, mutant):
    _assert_caught_by_its_cases(lambda: _verify_cpu(cpu, suite, _task_id(mutant), _mutant(mutant, ".cpp")), mutant,
                                CPU_MUTANTS[mutant])


# A verify stops at the first failing case, and an earlier case's fresh random inputs can meet the flaw by chance
# (seen about once in many runs: no_eps and eps_outside wrong on 1-2 elements of 'short'), so the cases made for
# the mutant are not reached; new inputs on the next attempt reach them.
ATTEMPTS = 3


def _assert_caught_by_its_cases(verify, mutant: str, expected: set[str] | None) -> None:
    """Every attempt rejects the mutant, and one (of ATTEMPTS, each with fresh inputs) by the cases made for it."""
    for _ in range(ATTEMPTS):
        verified = verify()
        assert not verified.correct, f"{mutant} passed every case"
        failed = _failed_cases(verified)
        assert failed, verified.message
        if expected is None or failed & expected:
            return
    pytest.fail(f"{mutant}: rejected {ATTEMPTS} times, never by the cases made for it ({sorted(expected or ())}); "
                f"last by {sorted(failed)}: {verified.message}")


@pytest.fixture(scope="module")
def triton(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("triton", reason="the triton extra is not installed")
    from kernelsage.tools.triton.backend import TritonBackend

    backend = TritonBackend(device="interpret", cache_dir=tmp_path_factory.mktemp("coverage-triton"), trials=2,
                            run_limits=Limits(wall_s=90, cpu_s=180))
    yield backend
    backend.close()


def _verify_triton(triton, suite, task_id: str, source: str):
    compiled = triton.compile(Candidate(task_id=task_id, files={"kernel.py": source}))
    assert compiled.ok, compiled.log
    return triton.verify(compiled.artifact, find_task(suite, task_id))


@pytest.fixture(scope="module")
def honest_triton(triton, suite):
    """Verifies a task's Triton example once per module (several mutants share it)."""
    checked: set[str] = set()

    def check(task_id: str) -> None:
        if task_id not in checked:
            honest = _verify_triton(triton, suite, task_id, _honest(task_id, ".py").read_text())
            assert honest.correct, (honest.message, _failed_cases(honest))
            checked.add(task_id)
    return check


@pytest.mark.parametrize("mutant", sorted(TRITON_MUTANTS))
def test_a_triton_mutant_is_rejected_on_the_interpreter(triton, suite, honest_triton, mutant):
    task_id = _task_id(mutant)
    honest_triton(task_id)
    _assert_caught_by_its_cases(lambda: _verify_triton(triton, suite, task_id, _mutant(mutant, ".py")), mutant,
                                TRITON_MUTANTS[mutant])


def test_every_mutant_is_an_edit_of_its_honest_kernel():
    assert set(EDITS) == {m + ".cpp" for m in CPU_MUTANTS} | {m + ".py" for m in TRITON_MUTANTS}
    for name, suffix in [*((m, ".cpp") for m in CPU_MUTANTS), *((m, ".py") for m in TRITON_MUTANTS)]:
        assert _mutant(name, suffix) != _honest(_task_id(name), suffix).read_text(), name
