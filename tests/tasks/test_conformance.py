"""The conformance report: every task of a checkout runnable by a backend as the suite's harness would run it,
or refused with one line, on fixture suites in the suites' layouts (the backend's own check is passed in)."""

from __future__ import annotations

from pathlib import Path

from kernelsage.tasks.conformance import conform, harness_routes
from kernelsage.tasks.loaders import load_suite
from kernelsage.tasks.loaders.tracks import suite_tracks

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
STRUCTURED = FIXTURES / "npukernelbench_structured"


def no_tensor_lists(task, cases) -> str:
    """A stand-in for a backend's rule: refuses tasks that take lists of tensors."""
    listed = [a["name"] for a in cases[0]["arguments"] if a["kind"] == "tensors"]
    return f"takes tensor lists ({', '.join(listed)})" if listed else ""


def test_each_task_is_runnable_or_refused_with_one_line() -> None:
    report = load_suite(STRUCTURED)
    result = conform(report, suite=str(STRUCTURED), format="npukernelbench", backend="ascend",
                     checks={"NPUKernelBench": no_tensor_lists})
    verdicts = {v.task: v for v in result.verdicts}
    assert result.routes == ("NPUKernelBench",)
    assert verdicts["level2/Norm/BiasedRmsNorm"].runnable and verdicts["level2/Norm/BiasedRmsNorm"].reason == ""
    assert verdicts["level2/Foreach/ForeachMulPairs"].reason == "takes tensor lists (xs, ys)"
    needs_npu = verdicts["level2/Broken/NeedsNpu"]
    assert not needs_npu.runnable and needs_npu.reason.startswith("its reference cannot run where kernelsage "
                                                                  "computes it (the CPU): case case_1: NpuUnavailable")
    assert all("\n" not in v.reason for v in result.verdicts)
    summary = result.summary()
    assert summary == {"tasks": 3, "runnable": 1, "refused": 2, "runnable_by_route": {"NPUKernelBench": 1},
                       "by_reason": {"takes tensor lists (xs, ys)": 1,
                                     "its reference cannot run where kernelsage computes it (the CPU)": 1}}
    as_json = result.to_dict()
    assert as_json["tasks"][0].keys() == {"id", "level", "runnable", "reason", "routes"}


def test_a_suite_without_a_route_for_the_backend_refuses_every_task_and_says_why() -> None:
    result = conform(load_suite(STRUCTURED), suite=str(STRUCTURED), format="npukernelbench", backend="triton",
                     checks={})
    assert result.summary()["runnable"] == 0 and result.routes == ()
    assert {v.reason for v in result.verdicts} == {
        "no triton route: NPUKernelBench's harness builds ascend kernels only and declares no tracks"}


def test_tasks_that_do_not_load_are_refused_in_their_places() -> None:
    root = FIXTURES / "kernelbench_tracked"
    result = conform(load_suite(root), suite=str(root), format="kernelbench", backend="triton", checks={})
    assert [(v.task, v.runnable) for v in result.verdicts] == [
        ("level1/3_Halve", True), ("level1/4_Broken", False), ("level1/5_Mismatch", False)]
    assert result.verdicts[1].reason.startswith("does not load: ") and "RuntimeError" in result.verdicts[1].reason
    assert "the reference fails on the CPU: RuntimeError" in result.verdicts[2].reason


def test_the_routes_are_the_tracks_the_checkout_declares_for_the_backend() -> None:
    kernelbench = suite_tracks(FIXTURES / "kernelbench_tracked" / "KernelBench", "kernelbench")
    assert harness_routes("kernelbench", kernelbench, "triton") == (("triton",), "")
    routes, why = harness_routes("kernelbench", kernelbench, "ascend")
    assert routes == () and why.endswith("declares no track kernelsage's ascend backend writes (its tracks: cuda, "
                                         "triton)")
    multi = suite_tracks(FIXTURES / "multikernelbench_groups" / "reference", "multikernelbench")
    assert harness_routes("multikernelbench", multi, "ascend") == (("ascendc", "ascendc_direct_launch"), "")
    assert harness_routes("multikernelbench", multi, "triton") == (("triton_ascend",), "")
    assert harness_routes("suite", [], "cpu") == (("kernelsage",), "")


def test_a_task_every_route_refuses_gives_each_route_s_reason_once() -> None:
    root = FIXTURES / "multikernelbench_groups"
    report = load_suite(root, task_ids=["activation/double_relu"])
    same = conform(report, suite=str(root), format="multikernelbench", backend="ascend",
                   checks={"ascendc": lambda task, cases: "no Ascend C kernel for float64",
                           "ascendc_direct_launch": lambda task, cases: "no Ascend C kernel for float64"})
    assert same.verdicts[0].reason == "no Ascend C kernel for float64"
    differ = conform(report, suite=str(root), format="multikernelbench", backend="ascend",
                     checks={"ascendc": lambda task, cases: "one reason",
                             "ascendc_direct_launch": lambda task, cases: "another"})
    assert differ.verdicts[0].reason == "ascendc: one reason; ascendc_direct_launch: another"
    assert differ.verdicts[0].routes == {"ascendc": "one reason", "ascendc_direct_launch": "another"}
