"""Compiler-output parsing, summaries, and the shared timing function."""

from __future__ import annotations

from kernelsage.tasks.loaders import find_task
from kernelsage.tools.cpu.build import MAX_COMPILER_ERRORS
from kernelsage.tools.diagnostics import (
    by_severity,
    describe_mismatches,
    first_error,
    keep_start,
    parse_compiler_output,
    summarize_compiler_errors,
)
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.results import Candidate, CaseResult, CompileResult, Mismatch, Status, VerifyResult
from kernelsage.tools.timing import measure

RELU = """#include "kernelsage_cpu.h"
#include <cstdint>
int ks_kernel(const ks_tensor* in, int n_in, ks_tensor* out, int n_out, const ks_attr* a, int n_a) {
    const int64_t n = ks_numel(&in[0]);
    if (in[0].dtype == KS_FLOAT32) {
        const float* x = (const float*)in[0].data; float* y = (float*)out[0].data;
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
        return 0;
    }
    const uint16_t* x = (const uint16_t*)in[0].data; uint16_t* y = (uint16_t*)out[0].data;
    for (int64_t i = 0; i < n; ++i) { float v = ks_half_to_float(x[i]); y[i] = ks_float_to_half(v > 0.f ? v : 0.f); }
    return 0;
}
"""

GCC_LOG = """kernel.cpp: In function 'int ks_kernel(...)':
kernel.cpp:6:12: error: 'undeclared_value' was not declared in this scope
    6 |     y[0] = undeclared_value;
      |            ^~~~~~~~~~~~~~~~
kernel.cpp:9:5: warning: unused variable 'z' [-Wunused-variable]
kernel.cpp:6:12: error: 'undeclared_value' was not declared in this scope
/usr/bin/ld: /tmp/ccX.o: in function `ks_kernel': kernel.cpp:(.text+0x1d): undefined reference to `helper()'
collect2: error: ld returned 1 exit status
"""


def test_gcc_and_linker_messages_are_parsed():
    messages = parse_compiler_output(GCC_LOG)
    first = messages[0]
    assert (first.file, first.line, first.column, first.severity) == ("kernel.cpp", 6, 12, "error")
    assert "undeclared_value" in first.message
    assert messages[1].severity == "warning" and messages[1].line == 9
    assert any("undefined reference to `helper()'" in m.message and m.line == 0 for m in messages)


def test_summary_deduplicates_errors_and_limits_length():
    result = CompileResult(ok=False, status=Status.COMPILE_ERROR, log=GCC_LOG, errors=parse_compiler_output(GCC_LOG))
    summary = summarize_compiler_errors(result, limit=2)
    assert summary.count("undeclared_value") == 1
    assert summary.splitlines()[0].startswith("kernel.cpp:6:12:")
    assert summary.splitlines()[-2:] == ["... and 1 more errors", "(1 warning not shown)"]


WARNING_FIRST_LOG = """kernel.cpp: In function 'int ks_kernel(...)':
kernel.cpp:3:9: warning: unused variable 'z' [-Wunused-variable]
kernel.cpp:2:1: note: declared here
kernel.cpp:7:5: error: expected ';' before '}' token
kernel.cpp:8:5: warning: comparison of integer expressions of different signedness
kernel.cpp:9:1: error: 'y' was not declared in this scope
"""


def test_errors_come_first_and_the_first_error_is_never_a_warning_or_a_note():
    messages = parse_compiler_output(WARNING_FIRST_LOG)
    assert messages[0].severity == "warning"  # the log's order
    assert [m.severity for m in by_severity(messages)] == ["error", "error", "warning", "warning", "note"]
    assert [m.line for m in by_severity(messages)][:2] == [7, 9]  # log order within a severity
    assert first_error(messages).line == 7
    assert first_error([m for m in messages if m.severity != "error"]) is None


def test_a_long_log_keeps_its_start_and_its_end():
    log = "kernel.cpp:2:5: error: the real first error\n" + "".join(
        f"kernel.cpp:{n}:1: warning: noise {n}\n" for n in range(3, 3000)) + "collect2: error: ld returned 1\n"
    kept = keep_start(log, 5_000)
    assert len(kept) <= 5_000 and len(log) > 20_000
    assert kept.startswith("kernel.cpp:2:5: error: the real first error\n")
    assert kept.rstrip().endswith("collect2: error: ld returned 1")
    assert "characters of compiler output left out" in kept
    assert all(line.startswith(("kernel.cpp:", "[...", "collect2")) for line in kept.splitlines())  # whole lines
    assert keep_start("short log", 5_000) == "short log"


def test_the_compiler_stops_at_the_error_limit_and_the_first_error_leads(cpu_backend, suite):
    # One early error, then more errors than the limit lets through.
    noise = "\n".join(f"    int unused_{n} = {n};" for n in range(400))
    errors = "\n".join(f"    undeclared_{n} = 1;" for n in range(60))
    source = ("#include \"kernelsage_cpu.h\"\nint ks_kernel(const ks_tensor* i, int a, ks_tensor* o, int b, "
              "const ks_attr* t, int c) {\n    the_first_error = 0;\n" + noise + "\n" + errors + "\n    return 0;\n}\n")
    evaluation = evaluate_candidate(cpu_backend, find_task(suite, "l1_relu"), {"kernel.cpp": source})
    compiled = evaluation.compile
    assert compiled.status is Status.COMPILE_ERROR
    errors_seen = [m for m in compiled.errors if m.severity == "error"]
    assert "the_first_error" in first_error(compiled.errors).message
    assert len(errors_seen) <= MAX_COMPILER_ERRORS
    assert not any("undeclared_59" in m.message for m in compiled.errors)  # the compiler stopped before it
    assert "the_first_error" in summarize_compiler_errors(compiled).splitlines()[0]


def test_warnings_before_the_error_neither_hide_it_nor_stand_in_for_it(cpu_backend, suite):
    noisy = "static int noisy() {\n" + "\n".join(f"    int unused_{n} = {n};" for n in range(300)) + \
        "\n    return 0;\n}\n"
    source = ('#include "kernelsage_cpu.h"\n' + noisy + "int ks_kernel(const ks_tensor* i, int a, ks_tensor* o, "
              "int b, const ks_attr* t, int c) {\n    return the_real_error;\n}\n")
    compiled = cpu_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": source}))
    assert compiled.status is Status.COMPILE_ERROR
    assert compiled.errors[0].severity == "warning"  # the log starts with warnings
    assert "characters of compiler output left out" in compiled.log  # and is longer than what is kept
    assert "the_real_error" in first_error(compiled.errors).message
    assert by_severity(compiled.errors)[0] == first_error(compiled.errors)


def test_mismatch_description_shows_indices_and_values():
    case = CaseResult(case="odd", trial=1, passed=False, status=Status.WRONG_RESULT, n_elements=10, n_mismatch=2,
                      mismatches=[Mismatch(output=0, index=[1, 2], expected=0.5, actual=-0.5)])
    text = describe_mismatches(VerifyResult(status=Status.WRONG_RESULT, correct=False, cases=[case]))
    assert "case 'odd' (trial 1): 2 of 10 elements wrong (20.0%)" in text
    assert "index [1, 2]: got -0.5, expected 0.5" in text


def wrong_where_zero(**measured) -> VerifyResult:
    """493 of 1,000 elements wrong, all where the reference is 0 (a relu that passes negatives through)."""
    case = CaseResult(case="n1000", trial=0, passed=False, status=Status.WRONG_RESULT, n_elements=1000,
                      n_mismatch=493, max_abs_error=2.9, mean_abs_error=0.7, max_rel_error=0.0, atol=1e-3, rtol=1e-3,
                      mismatches=[Mismatch(output=0, index=[i], expected=0.0, actual=-0.25 * i) for i in (1, 4, 5)],
                      **measured)
    return VerifyResult(status=Status.WRONG_RESULT, correct=False, cases=[case])


def test_mismatch_statistics_mean_what_they_say_where_the_reference_is_zero():
    text = describe_mismatches(wrong_where_zero(n_mismatch_zero_reference=493, max_rel_error_failing=0.0,
                                                max_abs_reference=3.0))
    assert "493 of 1,000 elements wrong (49.3%)" in text
    assert "max abs error 2.9" in text and "largest |expected| 3" in text
    assert "493 wrong elements have expected value 0 (no relative error there" in text
    assert "over the 0 wrong elements whose expected value is non-zero" in text  # no relative error is claimed
    assert "index [4]: got -1, expected 0" in text
    mixed = describe_mismatches(wrong_where_zero(n_mismatch_zero_reference=400, max_rel_error_failing=0.8,
                                                 max_abs_reference=3.0))
    assert "max rel error 0.8 over the 93 wrong elements whose expected value is non-zero" in mixed


def test_a_record_without_failing_element_statistics_says_what_its_relative_error_covers():
    text = describe_mismatches(wrong_where_zero())
    assert "max rel error 0, mean 0, over all elements whose expected value is non-zero" in text
    assert "493 of 1,000 elements wrong (49.3%)" in text


def test_a_case_failed_by_another_rule_does_not_claim_wrong_elements():
    case = CaseResult(case="gelu", trial=0, passed=False, status=Status.WRONG_RESULT, n_elements=64, n_mismatch=0,
                      max_abs_error=4e-4, max_rel_error=2e-3, atol=1e-3, rtol=1e-3,
                      message="the task's own precision check (custom_check_precision) failed")
    text = describe_mismatches(VerifyResult(status=Status.WRONG_RESULT, correct=False, cases=[case]))
    assert "0 of 64" not in text and "no element exceeds the element-wise tolerance (atol 0.001" in text
    assert text.splitlines()[-1].endswith("(custom_check_precision) failed")


def test_a_real_mismatch_names_its_share_and_first_elements(cpu_backend, suite):
    identity = RELU.replace("x[i] > 0.f ? x[i] : 0.f", "x[i]")  # wrong exactly where relu's answer is 0
    evaluation = evaluate_candidate(cpu_backend, find_task(suite, "l1_relu"), {"kernel.cpp": identity})
    assert evaluation.status is Status.WRONG_RESULT
    failure = evaluation.verify.first_failure()
    text = describe_mismatches(evaluation.verify)
    assert f"{failure.n_mismatch:,} of {failure.n_elements:,} elements wrong ({failure.mismatch_fraction:.1%})" in text
    assert 0.3 < failure.mismatch_fraction < 0.7
    assert "first wrong elements:" in text and ", expected 0" in text
    # a relative error is only ever given with the elements it covers (the reference is 0 where this fails)
    assert all("non-zero" in line for line in text.splitlines() if "max rel error" in line)


def test_measure_runs_warmups_then_timed_reps_with_sync_after_each():
    calls: list[str] = []
    timing = measure(lambda: calls.append("run"), warmup=3, reps=7, sync=lambda: calls.append("sync"))
    assert calls.count("run") == 10
    # one sync after the warm-ups, one after every timed run
    assert calls.count("sync") == 8 and calls[:4] == ["run"] * 3 + ["sync"]
    assert (timing.warmup, timing.reps) == (3, 7)
    assert timing.minimum <= timing.median and timing.cv >= 0
