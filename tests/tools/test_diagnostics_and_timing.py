"""Compiler-output parsing, summaries, and the shared timing function."""

from __future__ import annotations

from kernelsage.tools.diagnostics import describe_mismatches, parse_compiler_output, summarize_compiler_errors
from kernelsage.tools.results import CaseResult, CompileResult, Mismatch, Status, VerifyResult
from kernelsage.tools.timing import measure

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
    assert summary.endswith("... and 1 more errors")


def test_mismatch_description_shows_indices_and_values():
    case = CaseResult(case="odd", trial=1, passed=False, status=Status.WRONG_RESULT, n_elements=10, n_mismatch=2,
                      mismatches=[Mismatch(output=0, index=[1, 2], expected=0.5, actual=-0.5)])
    text = describe_mismatches(VerifyResult(status=Status.WRONG_RESULT, correct=False, cases=[case]))
    assert "case 'odd' (trial 1): 2 of 10 elements wrong" in text
    assert "index [1, 2]: expected 0.5, got -0.5" in text


def test_measure_runs_warmups_then_timed_reps_with_sync_after_each():
    calls: list[str] = []
    timing = measure(lambda: calls.append("run"), warmup=3, reps=7, sync=lambda: calls.append("sync"))
    assert calls.count("run") == 10
    # one sync after the warm-ups, one after every timed run
    assert calls.count("sync") == 8 and calls[:4] == ["run"] * 3 + ["sync"]
    assert (timing.warmup, timing.reps) == (3, 7)
    assert timing.minimum <= timing.median and timing.cv >= 0
