"""The adoption audit: what counts as evidence of an item in the code, what does not, and the labelled set of
declared adoptions (tests/graph/audit_cases) it must tell apart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernelsage.graph.adoption_audit import (
    EMPTY,
    Code,
    Preprocessor,
    Round,
    audit_episode,
    evidence,
    item_cues,
    preprocessor_for,
)
from kernelsage.graph.audit.preprocess import preprocess
from tests.graph.audit_cases import Case, load_cases

CPU = preprocessor_for("cpu")
LOOP = "int ks_kernel(const float* x, float* y, long n) {\n    for (long i = 0; i < n; ++i) y[i] = x[i];\n    return 0;\n}\n"
PRAGMA = LOOP.replace("    for (long", "    #pragma omp parallel for simd\n    for (long")
FMA = ("#include <immintrin.h>\nint ks_kernel(__m256 a, __m256 b, __m256 c, float* y) {\n"
       "    _mm256_storeu_ps(y, _mm256_fmadd_ps(a, b, c));\n    return 0;\n}\n")
CASES = load_cases()


def shows(text: str, source: str, previous: str = "", code_example: str | None = None, name: str = "kernel.cpp") -> bool:
    before = Code.of({name: previous}, preprocessor=CPU) if previous else EMPTY
    return evidence(item_cues([text], code_example), Code.of({name: source}, preprocessor=CPU), before)[0]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=c.xfail, strict=True)]
                                               if c.xfail else []) for c in CASES])
def test_the_audit_tells_each_labelled_adoption_as_labelled(case: Case) -> None:
    preprocessor = preprocessor_for(case.backend)
    current = Code.of({case.file_name: case.current}, preprocessor=preprocessor)
    previous = Code.of({case.file_name: case.previous}, preprocessor=preprocessor) if case.previous else EMPTY
    evidenced, matched, reason = evidence(item_cues([case.item], case.example), current, previous)
    assert evidenced == case.label, f"{case.why}; the audit said: {reason}"
    assert bool(matched) == evidenced and "read without" not in reason  # every case is read by the preprocessor


def test_the_labelled_set_is_large_and_balanced_enough_to_measure() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    for backend in ("cpu", "ascend", "triton"):
        assert {c.label for c in CASES if c.backend == backend} == {True, False}
    assert sum(c.label for c in CASES) >= 30 and sum(not c.label for c in CASES) >= 30


def test_names_and_pragmas_the_item_gives_are_evidence_when_live_code_gains_them() -> None:
    assert shows("Use `#pragma omp parallel for` on elementwise loops", PRAGMA, previous=LOOP)
    assert shows("Fuse with _mm256_fmadd_ps instead of a multiply and an add", FMA)
    assert not shows("Fuse with _mm256_fmadd_ps instead of a multiply and an add", PRAGMA)
    # a pragma applies to the statement after it: one closing a block applies to nothing
    trailing = LOOP.replace("    return 0;\n}", "    {\n        y[0] = 0;\n        #pragma omp parallel for\n    }\n"
                                                 "    return 0;\n}")
    assert not shows("Use `#pragma omp parallel for`", trailing, previous=LOOP)


def test_comments_strings_and_common_words_are_no_evidence() -> None:
    assert item_cues(["for float return the loop and data in a for loop"]).count == 0
    assert not shows("for float return the loop", LOOP)
    commented = LOOP.replace("return 0;", "return 0; // _mm256_fmadd_ps, #pragma omp parallel for")
    assert not shows("Use _mm256_fmadd_ps", commented)
    assert not shows("Use `#pragma omp parallel for`", commented)
    assert not shows("Use _mm256_fmadd_ps", LOOP.replace("return 0;", 'puts("_mm256_fmadd_ps"); return 0;'))


def test_only_new_uses_count_and_the_contract_is_no_baseline() -> None:
    assert not shows("Use _mm256_fmadd_ps", FMA, previous=FMA)
    # round 1: nothing came before, so a name the ABI header shows (ks_numel) still counts when newly used
    assert shows("Return 0 from ks_kernel's helpers via ks_numel", LOOP.replace("n; ++i", "ks_numel(x); ++i"))


def test_a_code_example_counts_by_its_lines_names_and_the_direction_of_its_diff() -> None:
    example = "for (long i = 0; i < n; i += 8) {\n    __m256 v = _mm256_loadu_ps(x + i);\n}"
    source = LOOP.replace("return 0;", "for (long i = 0; i < n; i += 8) { __m256 v = _mm256_loadu_ps(x + i); "
                                       "_mm256_storeu_ps(y + i, v); }\n    return 0;")
    assert shows("Vectorise the loop", source, previous=LOOP, code_example=example)
    diff = ("--- kernel.cpp\n+++ kernel.cpp\n@@ -1,3 +1,2 @@\n-    scratch_copy(x, tmp_buffer);\n"
            "     for (long i = 0; i < n; ++i)")
    before = LOOP.replace("return 0;", "scratch_copy(x, tmp_buffer); return 0;")
    assert shows("Drop the redundant copy", LOOP, previous=before, code_example=diff)  # its `-` side went away
    assert not shows("Drop the redundant copy", before, previous=before, code_example=diff)
    # plain words of an example count only two together, and only where they are read
    assert not shows("Tile it", LOOP.replace("return 0;", "int tile = 4; y[0] = tile; return 0;"),
                     code_example="int tile = 64;")
    both = LOOP.replace("return 0;", "int tile = 4, stripe = 2; y[0] = tile * stripe; return 0;")
    assert shows("Tile it", both, code_example="int tile = 64, stripe = 8;")
    unread = LOOP.replace("return 0;", "int tile = 4, stripe = 2; return 0;")
    assert not shows("Tile it", unread, code_example="int tile = 64, stripe = 8;")


def test_names_resolve_through_imports_and_namespaces() -> None:
    triton = ("import triton.language as language\n\ndef ks_kernel(inputs, outputs, attrs):\n"
              "    outputs[0].copy_(language.dot(inputs[0], inputs[1]))\n")
    assert shows("Use `tl.dot`", triton, name="kernel.py")
    assert not shows("Use `tl.dot`", triton.replace("language.dot", "language.sum"), name="kernel.py")
    ascend = "using namespace AscendC;\nint ks_launch() { LocalTensor<float> t; Muls(t, t, 2.0f, 8); return 0; }\n"
    assert shows("Scale with `AscendC::Muls`", ascend)
    assert not shows("Scale with `AscendC::Muls`", ascend.replace("using namespace AscendC;", ""))
    assert not shows("Scale with `AscendC::Muls`", ascend.replace("Muls", "Mul"))


def test_a_source_the_preprocessor_rejects_is_still_read_and_the_reason_says_how() -> None:
    broken = "#if 1\n" + PRAGMA  # unterminated #if
    code = Code.of({"kernel.cpp": broken}, preprocessor=CPU)
    evidenced, _, reason = evidence(item_cues(["Use `#pragma omp parallel for`"]), code)
    assert evidenced and "unterminated" in reason and "read without the preprocessor" in reason
    dead = "#error stop\n#if 0\n" + PRAGMA.replace("ks_kernel", "old") + "#endif\n" + LOOP
    evidenced, _, reason = evidence(item_cues(["Use `#pragma omp parallel for`"]), Code.of(dead, preprocessor=CPU))
    assert not evidenced and "#error" in reason  # `#if 0` is dropped without the preprocessor too
    missing = Code.of({"kernel.cpp": PRAGMA}, preprocessor=Preprocessor(compiler="kernelsage-no-such-compiler"))
    assert "no compiler" in evidence(item_cues(["Use `#pragma omp parallel for`"]), missing)[2]


def test_c_and_cpp_are_preprocessed_as_their_backend_compiles_them() -> None:
    from kernelsage.tools.cpu.backend import CpuBackend

    assert CPU.compiler == "g++" and set(CPU.flags) == {"-std=c++17", "-march=native", "-fopenmp"}
    assert preprocessor_for("ascend") == Preprocessor()  # the host g++ at C++17: no CANN compiler here
    custom = preprocessor_for(CpuBackend(compiler="clang++", flags=("-std=c++20", "-O2", "-fopenmp")))
    assert custom == Preprocessor(compiler="clang++", flags=("-std=c++20", "-fopenmp"))
    # -fopenmp defines _OPENMP for the cpu backend, as its build does; the Ascend preprocessor has no OpenMP
    guarded = PRAGMA.replace("    #pragma", "#ifdef _OPENMP\n    #pragma").replace("simd\n", "simd\n#endif\n")
    assert Code.of(guarded, preprocessor=CPU).has_pragma(("omp", "parallel", "for"))
    assert Code.of(guarded, preprocessor=preprocessor_for("ascend")).pragmas == ()


def test_the_preprocessor_reads_no_file_of_the_host(tmp_path: Path) -> None:
    secret = tmp_path / "secret.h"
    secret.write_text("int host_secret_marker;\n")
    spellings = [f'#include "{secret}"', f"%:include <{secret}>", f'# /* */ include "{secret}"',
                 f'#inc\\\nlude "{secret}"', f'/*\n*/ #include "{secret}"', f'#include_next "{secret}"',
                 f'#define HEADER "{secret}"\n#include HEADER', f'#embed "{secret}"', f'#import "{secret}"']
    for spelling in spellings:
        result = preprocess(spelling + "\n" + LOOP, CPU)
        assert not result.failure and "host_secret_marker" not in result.text, spelling
        assert "ks_kernel" in result.text


def test_a_macro_bomb_is_stopped_and_read_without_the_preprocessor() -> None:
    levels = ["#define L0 x x x x x x x x x x"] + [f"#define L{i} " + " ".join([f"L{i - 1}"] * 10) for i in range(1, 9)]
    started = time.monotonic()
    code = Code.of("\n".join(levels) + "\nint v = L8;\n" + PRAGMA, preprocessor=CPU)
    assert time.monotonic() - started < 30 and "size limit" in code.notes[0]
    assert code.has_pragma(("omp", "parallel", "for"))


def test_an_episode_is_evidenced_by_any_round_that_declared_the_item() -> None:
    cues = {1: item_cues(["Use `#pragma omp parallel for`"]), 2: item_cues(["Use _mm256_fmadd_ps"]),
            3: item_cues(["Think about it"])}
    rounds = [Round(round=1, files={"kernel.cpp": LOOP}, adopted=frozenset({1, 3})),
              Round(round=2, files={"kernel.cpp": PRAGMA}, adopted=frozenset({1, 2})),
              Round(round=3, files={"kernel.cpp": PRAGMA}, adopted=frozenset({1}))]
    checks = {c.item_id: c for c in audit_episode(rounds, cues, preprocessor=CPU)}
    assert checks[1].evidenced and checks[1].round == 2 and checks[1].matched == ["#pragma omp parallel for"]
    assert not checks[2].evidenced and checks[2].round == 2 and "none of its 1 cues" in checks[2].reason
    assert not checks[3].evidenced and checks[3].cues == 0 and "names nothing" in checks[3].reason
    # a round that only repeats code an earlier round wrote shows nothing new
    late = [Round(round=1, files={"kernel.cpp": PRAGMA}, adopted=frozenset()),
            Round(round=2, files={"kernel.cpp": PRAGMA}, adopted=frozenset({1}))]
    assert not audit_episode(late, cues, preprocessor=CPU)[0].evidenced


def test_code_nested_deeper_than_the_readers_follow_is_read_whole_not_raised() -> None:
    # a hostile candidate must not crash the curator (the episode would be lost): its names all count
    from kernelsage.graph.audit.cpp import read_cpp
    from kernelsage.graph.audit.preprocess import Preprocessor
    from kernelsage.graph.audit.python import read_python

    deep_cpp = "int ks_kernel(int x) { " + "{" * 5000 + "DataCopyPad(x);" + "}" * 5000 + " return 0; }"
    reading = read_cpp(deep_cpp, Preprocessor())
    assert "nested too deeply" in reading.note and ("DataCopyPad",) in reading.uses
    deep_python = "def ks_kernel(x):\n    return tl.dot(x, " + "-" * 200_000 + "x)\n"
    assert "nested too deeply" in read_python(deep_python).note


def test_a_lone_surrogate_in_the_written_code_is_read_not_raised() -> None:
    # a model's JSON answer can hold "\ud800": the curator must not lose the episode over it
    from kernelsage.graph.audit.code import Code

    cpp = Code.of({"kernel.cpp": 'int ks_kernel() { const char* s = "\ud800"; DataCopyPad(s); return 0; }'})
    assert ("DataCopyPad",) in cpp.uses and not cpp.notes
    python = Code.of({"kernel.py": 'def ks_kernel(x):\n    return tl.dot(x, "\ud800")\n'})
    assert not python.notes  # read by the parser, not the fallback
