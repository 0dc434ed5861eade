"""The adoption audit's pure rules: what counts as evidence of an item in the code, and what does not."""

from __future__ import annotations

from kernelsage.graph.adoption_audit import Code, Round, audit_episode, evidence, item_cues

LOOP = "int ks_kernel(const float* x, float* y, long n) {\n    for (long i = 0; i < n; ++i) y[i] = x[i];\n    return 0;\n}\n"
PRAGMA = LOOP.replace("    for (long", "    #pragma omp parallel for simd\n    for (long")
FMA = "#include <immintrin.h>\nvoid f(__m256 a, __m256 b, __m256 c) { __m256 d = _mm256_fmadd_ps(a, b, c); }\n"


def shows(text: str, source: str, previous: str = "", baseline: str = "", code_example: str | None = None) -> bool:
    cues = item_cues([text], code_example)
    return evidence(cues, Code.of({"kernel.cpp": source}), Code.of({"kernel.cpp": previous}),
                    Code.of({"b.txt": baseline}))[0]


def test_names_and_pragmas_the_item_gives_are_evidence_when_the_code_gains_them() -> None:
    assert shows("Use `#pragma omp parallel for` on elementwise loops", PRAGMA, previous=LOOP)
    assert shows("Fuse with _mm256_fmadd_ps instead of a multiply and an add", FMA)
    assert not shows("Fuse with _mm256_fmadd_ps instead of a multiply and an add", PRAGMA)


def test_common_words_prose_and_comments_are_no_evidence() -> None:
    # every word of this item is in the code, but none is a name: nothing to check, so nothing evidenced
    assert item_cues(["for float return the loop and data in a for loop"]).count == 0
    assert not shows("for float return the loop", LOOP)
    commented = LOOP.replace("return 0;", "return 0; // _mm256_fmadd_ps, #pragma omp parallel for")
    assert not shows("Use _mm256_fmadd_ps", commented)
    assert not shows("Use `#pragma omp parallel for`", commented)
    assert not shows("Use _mm256_fmadd_ps", LOOP.replace("return 0;", 'puts("_mm256_fmadd_ps"); return 0;'))


def test_what_was_already_there_or_in_the_contract_is_no_new_evidence() -> None:
    assert not shows("Use _mm256_fmadd_ps", FMA, previous=FMA)
    assert not shows("Return 0 from ks_kernel", LOOP, baseline="int ks_kernel(const ks_tensor* in, ...);")
    assert shows("Return 0 from ks_kernel", LOOP)  # without the contract it would have counted


def test_a_code_example_counts_by_its_fragments_names_and_the_direction_of_its_diff() -> None:
    example = "for (long i = 0; i < n; i += 8) {\n    __m256 v = _mm256_loadu_ps(x + i);\n}"
    source = LOOP.replace("return 0;", "for (long i = 0; i < n; i += 8) { __m256 v = _mm256_loadu_ps(x + i); }\n"
                                       "    return 0;")
    assert shows("Vectorise the loop", source, previous=LOOP, code_example=example)
    diff = ("--- kernel.cpp\n+++ kernel.cpp\n@@ -1,3 +1,2 @@\n-    for (int pass = 0; pass < 6; ++pass)\n"
            "-        scratch_copy(x, tmp_buffer);\n     for (long i = 0; i < n; ++i)")
    before = LOOP.replace("return 0;", "scratch_copy(x, tmp_buffer); return 0;")
    assert shows("Drop the redundant copy", LOOP, previous=before, code_example=diff)  # its `-` side went away
    assert not shows("Drop the redundant copy", before, previous=before, code_example=diff)
    # plain words of an example count only two together
    assert not shows("Tile it", LOOP.replace("return 0;", "int tile = 4; return 0;"), code_example="int tile = 64;")
    assert shows("Tile it", LOOP.replace("return 0;", "int tile = 4, stripe = 2; return 0;"),
                 code_example="int tile = 64, stripe = 8;")


def test_an_episode_is_evidenced_by_any_round_that_declared_the_item() -> None:
    cues = {1: item_cues(["Use `#pragma omp parallel for`"]), 2: item_cues(["Use _mm256_fmadd_ps"]),
            3: item_cues(["Think about it"])}
    rounds = [Round(round=1, files={"kernel.cpp": LOOP}, adopted=frozenset({1, 3})),
              Round(round=2, files={"kernel.cpp": PRAGMA}, adopted=frozenset({1, 2})),
              Round(round=3, files={"kernel.cpp": PRAGMA}, adopted=frozenset({1}))]
    checks = {c.item_id: c for c in audit_episode(rounds, cues)}
    assert checks[1].evidenced and checks[1].round == 2 and checks[1].matched == ["#pragma omp parallel for"]
    assert not checks[2].evidenced and checks[2].round == 2 and "none of its 1 cues" in checks[2].reason
    assert not checks[3].evidenced and checks[3].cues == 0 and "names nothing" in checks[3].reason
    # a round that only repeats code an earlier round wrote shows nothing new
    late = [Round(round=1, files={"kernel.cpp": PRAGMA}, adopted=frozenset()),
            Round(round=2, files={"kernel.cpp": PRAGMA}, adopted=frozenset({1}))]
    assert not audit_episode(late, cues)[0].evidenced
