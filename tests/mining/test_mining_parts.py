"""The pure parts of mining: reading the model's answer, the verdict on synthetic timings, the lesson's diff,
and where known-good kernels are found."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.mining.lesson import slow_to_fast_diff
from kernelsage.mining.proposals import Variant, parse_variants, render_variants
from kernelsage.mining.sources import KnownKernel, backend_examples, from_folder, suite_answers
from kernelsage.mining.verdict import Judgement, gain_of, judge_removal
from kernelsage.tasks.loaders import load_suite
from kernelsage.tools.results import CompileResult, CompilerMessage, Evaluation, ProfileResult, Status, Timing

NAMES = ("kernel.cpp",)


def timing(median: float, spread: float) -> Timing:
    return Timing(mean=median, median=median, cv=0.0, minimum=median - spread, warmup=1, reps=100, stdev=spread,
                  ci_low=median - spread, ci_high=median + spread)


def profile(kernel: float, reference: float = 1.0, spread: float = 0.01) -> ProfileResult:
    return ProfileResult(status=Status.OK, ok=True, candidate=timing(kernel, spread),
                         reference=timing(reference, spread), output_correct=True)


def correct(kernel: float, spread: float = 0.01) -> Evaluation:
    compiled = CompileResult(ok=True, status=Status.OK)
    return Evaluation(status=Status.OK, compile=compiled, profile=profile(kernel, spread=spread), correct=True)


def test_variants_round_trip_and_unreadable_sections_are_named() -> None:
    written = [Variant("OpenMP loop", "Spreads the loop over the cores.", {"kernel.cpp": "int a;\n"}),
               Variant("tiling", "Keeps a block in cache.", {"kernel.cpp": "int b;\n"})]
    read, problems = parse_variants(render_variants(written), NAMES)
    assert read == written and problems == []
    broken = ("## Optimization: no file\nIt does things.\n```cpp\nint c;\n```\n"
              "## Optimization: no sentence\n```cpp file=kernel.cpp\nint d;\n```\n")
    read, problems = parse_variants(broken + render_variants(written[:1]), NAMES)
    assert [v.optimization for v in read] == ["OpenMP loop"]
    assert problems == ["variant 'no file': no complete block for kernel.cpp",
                        "variant 'no sentence': no sentence on what the optimization does"]
    assert parse_variants("nothing here", NAMES) == ([], ["the answer has no '## Optimization: NAME' section"])


def test_only_a_correct_variant_clearly_slower_than_the_original_is_kept() -> None:
    beside = profile(1.0)  # the original, profiled right after the variant: as fast as the reference
    slow = judge_removal(correct(3.0), beside)
    assert slow.kept and slow.gain.ratio == pytest.approx(3.0) and slow.gain.low < 3.0 < slow.gain.high
    assert not judge_removal(correct(1.02), beside).kept  # inside the 5% floor for drift between two runs
    noisy = judge_removal(correct(2.0, spread=0.6), beside)  # a 2x median, but intervals that overlap
    assert not noisy.kept and noisy.reason.startswith("not measurably slower (2.00x")
    assert not judge_removal(correct(0.5), beside).kept  # faster without it: no lesson
    assert judge_removal(correct(3.0), None).reason == "correct, but the original could not be profiled beside it"
    assert Judgement.from_dict(slow.to_dict()) == slow


def test_incorrect_and_unbuildable_variants_are_discarded_with_the_reason() -> None:
    wrong = Evaluation(status=Status.WRONG_RESULT, compile=CompileResult(ok=True, status=Status.OK))
    assert judge_removal(wrong, profile(1.0)) == Judgement("wrong_result", False, False, "incorrect (wrong_result)")
    error = CompilerMessage(file="kernel.cpp", line=3, column=1, severity="error", message="expected ';'")
    unbuilt = Evaluation(status=Status.COMPILE_ERROR,
                         compile=CompileResult(ok=False, status=Status.COMPILE_ERROR, errors=[error]))
    assert judge_removal(unbuilt, None).reason == "does not compile: expected ';'"


def test_gain_interval_is_built_from_the_ends_of_all_four_intervals() -> None:
    gain = gain_of(timing(1.0, 0.1), timing(1.0, 0.1), timing(4.0, 0.2), timing(2.0, 0.1))
    assert gain.ratio == pytest.approx(2.0)
    assert gain.low == pytest.approx((3.8 / 2.1) / (1.1 / 0.9))
    assert gain.high == pytest.approx((4.2 / 1.9) / (0.9 / 1.1))


def test_the_diff_goes_from_slow_to_fast() -> None:
    kernel = KnownKernel("relu", {"kernel.cpp": "#pragma omp parallel for\nloop();\n"}, "here")
    variant = Variant("OpenMP loop", "Spreads the loop.", {"kernel.cpp": "loop();\n"})
    diff = slow_to_fast_diff(variant, kernel)
    assert diff.splitlines()[:4] == ["--- kernel.cpp (without OpenMP loop)", "+++ kernel.cpp (with it)",
                                     "@@ -1 +1,2 @@", "+#pragma omp parallel for"]


def test_kernels_come_from_a_folder_the_backend_or_a_suite(tmp_path: Path) -> None:
    (tmp_path / "l1_relu.cpp").write_text("a\n")
    (tmp_path / "l2_softmax").mkdir()
    (tmp_path / "l2_softmax" / "kernel.cpp").write_text("b\n")
    (tmp_path / "notes.txt").write_text("not a kernel\n")
    found = from_folder(tmp_path, NAMES)
    assert [(k.task_id, k.files) for k in found] == [("l1_relu", {"kernel.cpp": "a\n"}),
                                                     ("l2_softmax", {"kernel.cpp": "b\n"})]
    assert found[0].sha256 != found[1].sha256
    with pytest.raises(ConfigurationError, match="no kernel found"):
        from_folder(tmp_path / "l2_softmax" / "..", ("other.cpp", "more.cpp"))
    shipped = {k.task_id for k in backend_examples("cpu", NAMES)}
    assert {"l1_relu", "l2_softmax", "l3_matmul"} <= shipped
    with pytest.raises(ConfigurationError, match="ships no reference kernels"):
        backend_examples("nosuch", NAMES)


def test_a_suite_answer_folder_beside_a_task_is_its_reference_answer(tmp_path: Path) -> None:
    suite = Path(__file__).resolve().parents[1] / "fixtures" / "suite"
    (tmp_path / "relu32.py").write_text((suite / "relu32.py").read_text())
    answer = tmp_path / "answer" / "relu32"
    answer.mkdir(parents=True)
    (answer / "kernel.cpp").write_text("int relu;\n")
    [kernel] = suite_answers(load_suite(tmp_path).tasks, lambda task: NAMES)
    assert kernel.task_id == "relu32" and kernel.files == {"kernel.cpp": "int relu;\n"}
    assert suite_answers(load_suite(suite).tasks, lambda task: NAMES) == []
