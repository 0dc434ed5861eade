"""What the writing and diagnosing prompts say about a failed round: the first error is an error (never a
warning or a note), compiler messages come errors first, and mismatch statistics say what they cover."""

from __future__ import annotations

from kernelsage.graph.nodes.diagnostician import evidence_of
from kernelsage.graph.nodes.prompting import summarise_attempt
from kernelsage.graph.nodes.retrieve import retrieval_query
from kernelsage.graph.records import Attempt, as_state
from kernelsage.tools.results import (
    CaseResult,
    CompileResult,
    CompilerMessage,
    Evaluation,
    Mismatch,
    Status,
    VerifyResult,
)


def message(line: int, severity: str, text: str) -> CompilerMessage:
    return CompilerMessage(file="kernel.cpp", line=line, column=1, severity=severity, message=text)


def failed_compile(*messages: CompilerMessage, log: str = "") -> Attempt:
    compiled = CompileResult(ok=False, status=Status.COMPILE_ERROR, errors=list(messages), log=log)
    return Attempt(round=1, stage="draft", status="compile_error",
                   evaluation=Evaluation(status=Status.COMPILE_ERROR, compile=compiled))


def test_the_first_error_shown_is_an_error_whatever_the_log_order() -> None:
    attempt = failed_compile(message(3, "warning", "unused variable 'z'"), message(2, "note", "declared here"),
                             message(7, "error", "expected ';' before '}'"), message(9, "error", "later error"))
    summary = summarise_attempt(attempt)
    assert "first error line 7: expected ';' before '}'" in summary and "unused" not in summary
    evidence = evidence_of(attempt).splitlines()[1:]
    assert [line.split(": ")[1] for line in evidence] == ["error", "error", "warning", "note"]
    query = retrieval_query({"task_id": "l1_relu", "attempts": [as_state(attempt)]}, "relu")
    assert "compiler error: expected ';'" in query and "unused" not in query


def test_a_failed_build_without_a_parsed_error_shows_how_the_log_ends() -> None:
    attempt = failed_compile(message(3, "warning", "unused variable 'z'"),
                             log="kernel.cpp:3:1: warning: unused variable 'z'\nsomething the parser does not know\n")
    summary = summarise_attempt(attempt)
    assert "first" not in summary and "the compiler's output ends: something the parser does not know" in summary


def test_the_diagnosis_evidence_counts_failures_where_the_reference_is_zero() -> None:
    case = CaseResult(case="n1000", trial=0, passed=False, status=Status.WRONG_RESULT, n_elements=1000,
                      n_mismatch=493, max_abs_error=2.9, atol=1e-3, rtol=1e-3, n_mismatch_zero_reference=493,
                      max_rel_error_failing=0.0, max_abs_reference=3.0,
                      mismatches=[Mismatch(output=0, index=[1], expected=0.0, actual=-0.5)])
    compiled = CompileResult(ok=True, status=Status.OK)
    verify = VerifyResult(status=Status.WRONG_RESULT, correct=False, cases=[case])
    attempt = Attempt(round=1, stage="draft", status="wrong_result",
                      evaluation=Evaluation(status=Status.WRONG_RESULT, compile=compiled, verify=verify))
    evidence = evidence_of(attempt)
    assert "493 of 1,000 elements wrong (49.3%)" in evidence
    assert "493 wrong elements have expected value 0" in evidence
    assert "over the 0 wrong elements whose expected value is non-zero" in evidence
    assert "output 0 index [1]: got -0.5, expected 0" in evidence
