"""NPUKernelBench tasks on the Ascend route as its harness runs them: the task's own pybind.cpp built (template
names replaced), kernel-only mode (question op_host, the tiling argument added), ModelNew called with the
reference's own arguments (tensor lists, None for an absent optional input, several outputs, in place), the
suite's rules (trials, NaN/inf) and the conformance line. Fixture tasks written for kernelsage in the upstream
layout (tests/fixtures/npukernelbench/tasks); builds use the STAND-IN toolchain (standin/README.md)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tasks.loaders.npu_standin import torch_npu_standin
from kernelsage.tools.ascend import commands, verdicts
from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.candidate import parse_op_signature
from kernelsage.tools.ascend.conformance import ascend_conformance
from kernelsage.tools.ascend.device_runner import run_suite_verify
from kernelsage.tools.ascend.glue import MODULE_FILE
from kernelsage.tools.ascend.jobs import suite_set
from kernelsage.tools.ascend.suite_build import suite_build
from kernelsage.tools.ascend.suite_rules import npukernelbench_rules, rules_for
from kernelsage.tools.results import Candidate, Status

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "npukernelbench"
FOREACH, NORM, INPLACE = "level2/Foreach/ForeachScaleList", "level2/Norm/AddShiftNorm", "level2/TensorMove/InplaceAxpy"
KERNEL = """#include "kernel_operator.h"
extern "C" __global__ __aicore__ void foreach_scale_list(GM_ADDR x, GM_ADDR scale, GM_ADDR y, GM_ADDR workspace) {}
"""
# Stands in for the built kernel_gen_ops (the suite's glue over the candidate's operator): each function checks
# what reached each position and computes the operator with torch, as a correct kernel would.
GLUE_STANDIN = """import torch

def foreach_scale_list(x, scale):
    assert isinstance(x, list) and all(isinstance(t, torch.Tensor) for t in x) and scale.dim() == 0
    return [t * scale for t in x]

def add_shift_norm(x1, x2, bias, gamma, epsilon):
    assert bias is None or bias.dim() == 1 and isinstance(epsilon, float)
    s = x1 + x2 if bias is None else x1 + x2 + bias
    mean = s.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(s.var(dim=-1, keepdim=True, unbiased=False) + epsilon)
    return [(s - mean) * rstd * gamma, mean, rstd, s]

def inplace_axpy(x, y, alpha):
    return x.add_(y, alpha=SIGN * alpha)
"""


@pytest.fixture(scope="module")
def suite():
    return load_suite(FIXTURES)


def test_conformance_runs_the_glue_tasks_and_names_what_is_missing(suite, tmp_path: Path) -> None:
    for task_id in (FOREACH, NORM, INPLACE):
        assert ascend_conformance(find_task(suite, task_id)) == ""
    assert ascend_conformance(find_task(suite, "level1/Activation/GeluCustom")).startswith(
        "no validation/pybind.cpp")
    copy = tmp_path / "tasks" / "level2" / "Norm" / "AddShiftNorm"
    shutil.copytree(FIXTURES / "tasks" / NORM, copy)
    glue = copy / "validation" / "pybind.cpp"
    glue.write_text(glue.read_text().replace("aclnnCustomOp", "aclnnLayerNorm"))
    task = find_task(load_suite(tmp_path), "level2/Norm/AddShiftNorm")
    assert ascend_conformance(task) == ("validation/pybind.cpp calls aclnnLayerNorm, not the operator's "
                                        "aclnnAddShiftNorm: the candidate's kernel would not be what runs")
    (copy / "question" / "op_host" / "add_shift_norm.cpp").unlink()
    assert ascend_conformance(task).startswith("no question/op_host/add_shift_norm.cpp: kernel-only mode")


def test_opdef_param_types_reach_the_msopgen_spec(suite) -> None:
    source = (FIXTURES / "tasks" / NORM / "question" / "op_host" / "add_shift_norm.cpp").read_text()
    signature = parse_op_signature(source, "add_shift_norm")
    assert signature.inputs == ("x1", "x2", "gamma", "bias") and signature.outputs == ("y", "mean", "rstd", "s")
    assert signature.input_types == ("required", "required", "required", "optional")
    spec = json.loads(commands.opgen_spec(signature, ["float32"]))[0]
    assert [d["param_type"] for d in spec["input_desc"]] == ["required", "required", "required", "optional"]
    foreach = parse_op_signature((FIXTURES / "tasks" / FOREACH / "question" / "op_host" /
                                  "foreach_scale_list.cpp").read_text(), "foreach_scale_list")
    assert (foreach.input_types, foreach.output_types) == (("dynamic", "required"), ("dynamic",))
    inplace = parse_op_signature((FIXTURES / "tasks" / INPLACE / "question" / "op_host" /
                                  "inplace_axpy.cpp").read_text(), "inplace_axpy")
    assert inplace.outputs == () and [a.name for a in inplace.attrs] == ["alpha"]


def test_kernel_only_mode_takes_the_question_host_and_adds_the_tiling_argument(suite, tmp_path: Path) -> None:
    task = find_task(suite, FOREACH)
    built = suite_build({"op_kernel/foreach_scale_list.cpp": KERNEL}, task)
    assert built is not None and built.op == "foreach_scale_list"
    assert built.files["op_host/foreach_scale_list.cpp"] == (
        FIXTURES / "tasks" / FOREACH / "question" / "op_host" / "foreach_scale_list.cpp").read_text()
    assert "GM_ADDR y, GM_ADDR workspace, GM_ADDR tiling) {}" in built.files["op_kernel/foreach_scale_list.cpp"]
    assert "EXEC_NPU_CMD(aclnnForeachScaleList, inputs, scale, outputs)" in built.glue
    assert "std::vector<at::Tensor> foreach_scale_list(" in built.glue
    with pytest.raises(ValueError, match=r"kernel-only mode: write op_kernel/foreach_scale_list\.cpp"):
        suite_build({"op_kernel/foreach_scale_list.cpp": KERNEL, "op_host/foreach_scale_list.cpp": ""}, task)
    full = suite_build({"op_kernel/foreach_scale_list.cpp": KERNEL, "op_host/foreach_scale_list.cpp": "// mine"},
                       task, "full")
    assert full is not None and full.files["op_host/foreach_scale_list.cpp"] == "// mine"
    assert "GM_ADDR workspace, GM_ADDR tiling" not in full.files["op_kernel/foreach_scale_list.cpp"]
    # the checkout's own base_config.yaml decides, as upstream's harness reads it
    (tmp_path / "base_config.yaml").write_text("kernel_only_mode: False\nstatic_shape_mode: True\n"
                                               "eval:\n  num_correct_trials: 2  # trials\n")
    rules = npukernelbench_rules(tmp_path / "tasks" / "level1" / "X")
    assert (rules.kernel_only, rules.per_case, rules.trials) == (False, True, 2)
    assert rules_for(task).trials == 1 and rules_for(task).nonfinite_fails == "nan_inf"


def test_the_task_glue_is_built_with_the_kernel_only_candidate(standin_backend: AscendBackend, suite) -> None:
    task = find_task(suite, FOREACH)
    assert standin_backend.candidate_files_for(task) == ("op_kernel/foreach_scale_list.cpp",)
    result = standin_backend.compile(Candidate(task_id=task.id, files={"op_kernel/foreach_scale_list.cpp": KERNEL}),
                                     task=task)
    assert result.ok and result.artifact is not None, result.log
    root = Path(result.artifact.path)
    assert json.loads((root / commands.SUITE_GLUE).read_text()) == {"op": "foreach_scale_list"}
    module = (root / MODULE_FILE).read_text()  # the stand-in linker's record: the compiled glue's source
    assert "EXEC_NPU_CMD(aclnnForeachScaleList, inputs, scale, outputs);" in module
    assert 'PYBIND11_MODULE(kernel_gen_ops, m)' in module
    glue_call = next(line for line in module.splitlines() if line.startswith("g++") and " -c glue_op.cpp" in line)
    assert "/include/experiment/runtime" in glue_call  # the CANN runtime headers upstream's glue build sees
    alone = standin_backend.compile(Candidate(task_id=task.id, files={"op_kernel/foreach_scale_list.cpp": KERNEL}))
    assert alone.status is Status.COMPILE_ERROR  # without the task the kernel alone is no candidate


class CpuRuntime:
    """A stand-in NPU runtime (labelled: not torch_npu) on the CPU, for the runner's calling convention."""

    device = torch.device("cpu")

    def synchronize(self) -> None:
        pass


def _verify_on_cpu(task, tmp_path: Path, glue: str, trials: int = 1) -> list[dict]:
    """The judge's sets for every case, the runner's suite calls through the task's ModelNew with `glue` as
    kernel_gen_ops, and the judge's verdicts: the whole verify path but the device."""
    (tmp_path / "kernel_gen_ops.py").write_text(glue)
    made = [suite_set(task, case, 1000 * trial + index) for trial in range(trials)
            for index, case in enumerate(task.cases)]
    sets = [one.item for one in made]
    calls = [{"set": number, "trial": number // len(task.cases), "case": task.cases[number % len(task.cases)].name}
             for number in range(len(made))]
    request = {"module": str(tmp_path / "kernel_gen_ops.py"), "sets": sets, "calls": calls,
               "model_source": (Path(task.origin.path) / "validation" / "module.py").read_text()}
    try:
        with torch_npu_standin():
            result = run_suite_verify(request, CpuRuntime())  # type: ignore[arg-type]
    finally:
        sys.modules.pop("kernel_gen_ops", None)  # the runner's process is the candidate's own; this one is not
    return verdicts.judge_verify(task, calls, [one.expected for one in made], [one.private for one in made],
                                 [one.names for one in made], result, 0, False, "", 30.0, nonfinite="nan_inf",
                                 aliased=[one.aliased for one in made])


@pytest.mark.parametrize("task_id", [FOREACH, NORM, INPLACE])
def test_model_new_gets_the_references_own_arguments(suite, tmp_path: Path, task_id: str) -> None:
    task = find_task(suite, task_id)
    cases = _verify_on_cpu(task, tmp_path, GLUE_STANDIN.replace("SIGN", "1"))
    assert [c["passed"] for c in cases] == [True] * len(task.cases), cases


def test_a_wrong_answer_through_the_glue_is_caught(suite, tmp_path: Path) -> None:
    cases = _verify_on_cpu(find_task(suite, INPLACE), tmp_path, GLUE_STANDIN.replace("SIGN", "-1"))
    assert cases[0]["status"] == Status.WRONG_RESULT.value
    nan = GLUE_STANDIN.replace("SIGN", "1").replace("return [t * scale for t in x]",
                                                     "return [t * scale / (t * 0) for t in x]")
    cases = _verify_on_cpu(find_task(suite, FOREACH), tmp_path, nan)
    assert not cases[0]["passed"] and "NaN or inf" in cases[0]["message"]


def test_nonfinite_rules() -> None:
    good, nan, inf = torch.ones(3), torch.tensor([1.0, float("nan")]), torch.tensor([float("inf")])
    assert verdicts.nonfinite_problem([good], [good], "nan_inf") == ""
    assert "kernel's output 0 holds 1 NaN" in verdicts.nonfinite_problem([nan], [nan], "nan_inf")
    assert verdicts.nonfinite_problem([inf], [inf], "nan") == ""  # allclose: inf matches inf
    assert "reference's output 0" in verdicts.nonfinite_problem([inf], [good], "nan_inf")
    assert verdicts.nonfinite_problem([nan], [nan], "") == ""


def test_multikernelbench_references_that_need_the_npu_are_refused(tmp_path: Path) -> None:
    from kernelsage.tasks.model import Task, TaskOrigin

    def conform(source: str) -> str:
        path = tmp_path / "reference" / "x.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return ascend_conformance(Task(id="x", level=1, category="", description="", cases=(), perf_case=None,
                                       instantiate=None, origin=TaskOrigin("multikernelbench", str(tmp_path),
                                                                           str(path))))

    assert conform("import torch\n# torch_npu.npu_iou in a comment\ny = torch.relu\n") == ""
    assert conform("import torch_npu\ny = torch_npu.npu_iou(a, b)\n").startswith(
        "the reference calls torch_npu.npu_iou, an NPU-only operator")
