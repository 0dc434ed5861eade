"""The mutation benchmark's pure generator (bench/mutants.py): mutants of every class from the shipped examples,
each one edit of one line, never inside a comment or a string, valid Python for Triton kernels, deterministic."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU = ROOT / "src" / "kernelsage" / "tools" / "cpu" / "examples"
TRITON = ROOT / "src" / "kernelsage" / "tools" / "triton" / "examples"


@pytest.fixture(scope="module")
def mutants():
    spec = importlib.util.spec_from_file_location("bench_mutants", ROOT / "bench" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _of(mutants, path: Path):
    lang = "cpp" if path.suffix == ".cpp" else "python"
    return path.read_text(), mutants.mutants_of(path.read_text(), lang, path.stem, path.name)


def test_every_class_comes_out_of_the_examples(mutants) -> None:
    made = [m for path in (CPU / "l2_add_rms_norm.cpp", CPU / "l3_topk.cpp", TRITON / "l3_matmul.py")
            for m in _of(mutants, path)[1]]
    assert {m.cls for m in made} == set(mutants.CLASSES)
    cpu = [m for m in made if m.kernel == "l2_add_rms_norm"]
    afters = {(m.cls, m.after) for m in cpu}
    # the examples: eps scaled, eps dropped, a weight dropped, a half-precision accumulator
    assert ("constants", 'const float eps = (float)(ks_attr_float(attrs, n_attrs, "eps", 1e-6) * 100.0);') in afters
    assert ("dropped", "const float scale = 1.0f / std::sqrt((float)(squares / n));") in afters
    assert any(m.cls == "dropped" and m.after.endswith("= sum[base + j] * scale;") for m in cpu)
    assert ("precision", "squares = ks_half_to_float(ks_float_to_half((float)(squares + (double)s * s)));") in afters
    topk = {(m.rule, m.after) for m in made if m.kernel == "l3_topk"}
    assert ("tie-order", "return row[p] > row[q] || (row[p] == row[q] && p > q);") in topk
    matmul = {(m.rule, m.after) for m in made if m.kernel == "l3_matmul"}
    assert any(r == "bfloat16-accumulator" and a == "acc = tl.zeros((BM, BN), dtype=tl.bfloat16)" for r, a in matmul)
    assert any(r == "dot-swap" and "tl.dot(b.to(tl.float32), a.to(tl.float32)" in a for r, a in matmul)
    assert any(r == "overrun-by-one" and a.startswith("mask = (rows[:, None] <= m)") for r, a in matmul)


def test_a_mutant_is_one_edit_of_the_line_it_names(mutants) -> None:
    for path in [*sorted(CPU.glob("*.cpp")), *sorted(TRITON.glob("*.py"))]:
        source, made = _of(mutants, path)
        assert made, path.name
        original = source.splitlines()
        for mutant in made:
            assert mutant.source != source and mutant.before != mutant.after
            changed = mutant.source.splitlines()
            assert len(changed) == len(original), (path.name, mutant.rule, mutant.line)
            differing = [i + 1 for i, (a, b) in enumerate(zip(original, changed, strict=True)) if a != b]
            assert differing == [mutant.line], (path.name, mutant.rule)
            assert changed[mutant.line - 1].strip() == mutant.after
            assert original[mutant.line - 1].strip() == mutant.before
        assert len({m.source for m in made}) == len(made)  # no two mutants alike


def test_comments_strings_and_docstrings_are_never_mutated(mutants) -> None:
    for path in [CPU / "l2_add_rms_norm.cpp", CPU / "l3_matmul.cpp", TRITON / "l2_rms_norm.py"]:
        source, made = _of(mutants, path)
        for mutant in made:
            before = source.splitlines()[mutant.line - 1].strip()
            assert not before.startswith(("//", "#", '"""')), (path.name, mutant.rule, before)
            assert '"eps"' not in before or '"eps"' in mutant.after  # the attribute's name stays


def test_triton_mutants_stay_python(mutants) -> None:
    for path in sorted(TRITON.glob("*.py")):
        for mutant in _of(mutants, path)[1]:
            ast.parse(mutant.source)  # a SyntaxError fails the test with the mutant's line


def test_generation_is_deterministic_and_hand_written_mutants_are_marked(mutants) -> None:
    _, first = _of(mutants, TRITON / "l2_rms_norm.py")
    _, second = _of(mutants, TRITON / "l2_rms_norm.py")
    assert [(m.id, m.source) for m in first] == [(m.id, m.source) for m in second]
    hand = [m for m in first if m.hand_written]
    assert [m.rule for m in hand] == ["eps-outside-sqrt"]
    assert "(tl.sqrt(tl.sum(x * x, axis=0) / n) + eps)" in hand[0].after


def test_a_bound_is_an_overrun_only_where_the_loop_variable_indexes(mutants) -> None:
    source = ("int f(const float* x, float* y, long n) {\n"
              "    for (int pass = 0; pass < 6; ++pass)\n"
              "        for (long i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;\n"
              "    return 0;\n}\n")
    rules = {(m.line, m.rule) for m in mutants.mutants_of(source, "cpp", "inline")}
    assert (2, "bound-flip") in rules and (2, "overrun-by-one") not in rules
    assert (3, "overrun-by-one") in rules
    python = "offs = pid * BLOCK + tl.arange(0, BLOCK)\n"  # `tl` is a module, not an index: no swap
    assert not [m for m in mutants.generate(python, "python", "inline") if m.rule == "index-swap"]


# -- the differential stress run's contract (bench/mutation_stress.py) and the outcomes (bench/mutation.py) ----

def _bench(name: str):
    sys.path.insert(0, str(ROOT / "bench"))  # bench/mutation.py imports its siblings by name
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "bench"))


@pytest.fixture(scope="module")
def stress():
    return _bench("mutation_stress")


def _task(task_id: str):
    from kernelsage.tasks.loaders import find_task, load_suite

    return find_task(load_suite("builtin", task_ids=[task_id]), task_id)


def test_the_promises_quote_every_description_that_says_what_nan_or_inf_give(stress) -> None:
    import re

    from kernelsage.tasks.loaders import load_suite

    tasks = {task.id: task for task in load_suite("builtin").tasks}
    for task_id, promise in stress.PROMISES.items():
        assert promise.quote in tasks[task_id].description, task_id
    mentions = {task_id for task_id, task in tasks.items()
                if re.search(r"(?<![A-Za-z])(NaN|inf)(?![A-Za-z])", task.description)}
    assert mentions == set(stress.PROMISES)


def test_nan_and_inf_lie_inside_the_contract_only_where_promised(stress) -> None:
    import torch

    relu = [s for s in stress.stress_sets(_task("l1_relu"), 5) if not s.skipped]  # skipped sets never run
    for s in relu:
        nonfinite = any(not bool(torch.isfinite(t.float()).all()) for t in s.inputs)
        assert bool(s.outside) == nonfinite == s.name.endswith("/nan"), s.name
    assert "promises nothing for NaN" in next(s.outside for s in relu if s.outside)
    greater = list(stress.stress_sets(_task("l1_greater"), 5))
    special = [s for s in greater if s.name.endswith("/special")]
    assert special and not any(s.outside for s in greater)
    assert all(bool(torch.isnan(s.inputs[0]).any()) and bool(torch.isinf(s.inputs[1]).any()) for s in special)
    for s in (s for s in stress.stress_sets(_task("l2_softmax"), 5) if s.name.endswith("/special")):
        x = s.inputs[0]
        assert not s.outside and bool((x == -float("inf")).any()), s.name
        assert not bool(torch.isnan(x).any() or (x == float("inf")).any())
        assert bool(torch.isfinite(x).any(dim=-1).all()) and bool(torch.isfinite(s.expected[0]).all())


def test_the_battery_goes_past_half_range_and_makes_pairs_cancel(stress) -> None:
    import torch

    sets = {s.name: s for s in stress.stress_sets(_task("l1_abs_diff"), 5)}
    huge = [s for name, s in sets.items() if name.endswith("/huge")]
    assert huge and all(float(s.inputs[0].abs().max()) > 65504 and bool(torch.isfinite(s.expected[0]).all())
                        for s in huge)
    for mode, scale in (("close", 1.0), ("close-large", 100.0)):
        a, b = next(s for name, s in sets.items() if name.endswith(f"/{mode}")).inputs
        assert float((b.abs() - a.abs()).abs().max()) <= 1e-3 * float(a.abs().max())
        assert float((a - b).abs().max()) > 0 and float(a.abs().max()) > scale
    relu = {s.name: s for s in stress.stress_sets(_task("l1_relu"), 5)}
    assert "overflows" not in relu["vec/huge"].skipped and "non-finite" in relu["half/huge"].skipped
    assert not any(name.endswith(("/close", "/special")) for name in relu)  # one input, nothing promised


def test_a_mutant_within_tolerance_wherever_the_original_is_right_is_not_told_apart(stress) -> None:
    import torch

    task = _task("l1_clamp")
    s = next(s for s in stress.stress_sets(task, 5) if s.name == "vec/plain")
    want = [s.expected[0].clone()]
    assert stress.verdict(task, s, want, [want[0].clone()])["verdict"] == "same"
    rounded = [s.expected[0].to(torch.float16).float()]  # within rtol 1e-3 of every value
    assert stress.verdict(task, s, want, rounded)["verdict"] == "within"
    off = [want[0].clone()]
    off[0][17] += 0.01
    assert stress.verdict(task, s, want, off) | {"max_abs_error": 0} == {
        "verdict": "differs", "output": 0, "n_mismatch": 1, "n_elements": off[0].numel(), "max_abs_error": 0,
        "max_rel_error": pytest.approx(0.01 / abs(float(want[0][17])), rel=1e-3), "atol": 1e-3, "rtol": 1e-3}
    wrong = [want[0].clone()]
    wrong[0][3] = 9.0  # the original itself is wrong here: only the same value vouches for the mutant
    assert stress.verdict(task, s, wrong, [wrong[0].clone()])["verdict"] == "same"
    assert stress.verdict(task, s, wrong, want) == {"verdict": "differs", "original_fails": True, "output": 0}
    elsewhere = [wrong[0].clone()]
    elsewhere[0][5] *= 1 + 2e-4
    assert stress.verdict(task, s, wrong, elsewhere)["verdict"] == "within"


def test_outcomes_keep_overruns_and_report_differences_outside_the_contract_apart() -> None:
    mutation = _bench("mutation")
    inside = {"compiled": True, "passed": True, "stress": {"differs": [], "same": 20, "within": ["vec/plain"],
                                                           "outside": {}}}
    assert mutation.outcome(inside, "cpu", "tie-flip") == "equivalent"
    assert mutation.outcome(inside, "cpu", "overrun-by-one") == "survived"
    by_contract = {**inside, "stress": {**inside["stress"], "outside": {"vec/nan": "promises nothing for NaN"}}}
    assert mutation.outcome(by_contract, "triton", "nan-flip") == "equivalent-by-contract"
    assert "vec/nan" in mutation.equivalence(by_contract)
    told_apart = {**inside, "stress": {**inside["stress"], "differs": ["vec/huge"]}}
    assert mutation.outcome(told_apart, "triton", "float32-to-float16") == "survived"
    unstressed = {**inside, "stress": {"differs": [], "same": 0, "within": [], "outside": {}}}
    assert mutation.outcome(unstressed, "cpu", "literal") == "survived"
    assert mutation.outcome({"compiled": True, "passed": False}, "cpu", "literal") == "killed"
