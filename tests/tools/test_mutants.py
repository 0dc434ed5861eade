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
