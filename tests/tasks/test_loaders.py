"""Loaders of the three task formats, on small fixture suites that include broken tasks."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

from kernelsage.errors import TaskLoadError, UnknownTaskError
from kernelsage.tasks.interface import case_interface, describe_interface
from kernelsage.tasks.loaders import detect_format, find_task, load_suite, load_task, suite_root

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _problem(report, name: str) -> str:
    matches = [p.message for p in report.problems if name in p.path]
    assert matches, f"no problem reported for {name}: {report.problems}"
    return matches[0]


def test_formats_are_detected_at_a_repository_root_or_any_folder_below():
    assert detect_format(FIXTURES / "suite") == "suite"
    assert detect_format(suite_root(FIXTURES / "kernelbench")) == "kernelbench"
    assert detect_format(suite_root(FIXTURES / "npukernelbench")) == "npukernelbench"
    # MultiKernelBench's files are KernelBench's format, but its reference/ folder tells it apart (its tolerance)
    assert detect_format(suite_root(FIXTURES / "multikernelbench")) == "multikernelbench"
    assert detect_format(FIXTURES / "multikernelbench" / "reference" / "activation") == "multikernelbench"
    assert detect_format(FIXTURES / "kernelbench" / "KernelBench" / "level1") == "kernelbench"
    assert suite_root(FIXTURES / "multikernelbench") == FIXTURES / "multikernelbench" / "reference"
    # The repository's own scripts (kernelbench/scripts, multikernelbench/dataset.py) are not tasks.
    assert not any("scripts" in p.path or "dataset" in p.path for p in load_suite(FIXTURES / "kernelbench").problems)


def test_the_level_comes_from_the_layout_wherever_the_suite_path_points():
    level2 = load_suite(FIXTURES / "kernelbench" / "KernelBench" / "level2")
    assert [(t.id, t.level) for t in level2.tasks] == [("7_Linear_Sum_Dim", 2)]
    root = load_suite(FIXTURES / "kernelbench")
    assert {t.id: t.level for t in root.tasks} == {"level1/1_Scaled_Tanh": 1, "level2/7_Linear_Sum_Dim": 2}


def test_a_suite_where_nothing_loads_is_an_error(tmp_path):
    with pytest.raises(TaskLoadError, match="no task loaded as npukernelbench"):
        load_suite(FIXTURES / "kernelbench", "npukernelbench")
    (tmp_path / "notes.txt").write_text("no tasks here")
    with pytest.raises(TaskLoadError, match="no task files found"):
        load_suite(tmp_path)


def test_multikernelbench_files_and_their_input_groups_load():
    report = load_suite(FIXTURES / "multikernelbench")
    assert sorted(t.id for t in report.tasks) == ["activation/leaky_relu", "npukernelbench_level2/3_layer_norm"]
    norm = find_task(report, "npukernelbench_level2/3_layer_norm")
    assert norm.level == 2 and [c.name for c in norm.cases] == ["group_0", "group_1"]
    assert norm.perf_case.name == "group_0"  # upstream times the first group
    instance = norm.instantiate(norm.cases[1], 0)
    assert tuple(instance.inputs["x"].shape) == (2, 8, 64) and instance.attrs == {"normalized_shape": (64,)}
    (out,) = instance.reference()  # forward imports torch_npu when called: the stand-in serves it
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(
        instance.inputs["x"], (64,), instance.inputs["weight"], instance.inputs["bias"]))
    relu = find_task(report, "activation/leaky_relu")
    assert relu.level == 1 and relu.instantiate(relu.cases[0], 0).attrs == {"negative_slope": 0.05}


def test_broken_suite_files_are_reported_and_the_rest_loads():
    report = load_suite(FIXTURES / "suite_broken")
    assert [task.id for task in report.tasks] == ["relu32"]
    assert "raises.py:5" in _problem(report, "raises.py") and "broken on purpose" in _problem(report, "raises.py")
    assert "defines no TASKS" in _problem(report, "no_tasks.py")
    assert "no test cases" in _problem(report, "bad_task.py")
    assert "already defined" in _problem(report, "zz_duplicate.py")


def test_kernelbench_tasks_map_module_arguments_onto_the_abi():
    report = load_suite(FIXTURES / "kernelbench", "kernelbench")
    assert sorted(task.id for task in report.tasks) == ["level1/1_Scaled_Tanh", "level2/7_Linear_Sum_Dim"]
    assert "no get_inputs() function" in _problem(report, "2_No_Inputs_Function.py")

    tanh = find_task(report, "level1/1_Scaled_Tanh")
    assert tanh.level == 1 and "torch.tanh" in tanh.description
    instance = tanh.instantiate(tanh.cases[0], 3)
    assert list(instance.inputs) == ["x"] and instance.attrs == {"scale": 0.5}
    (out,) = instance.reference()
    torch.testing.assert_close(out, torch.tanh(instance.inputs["x"]) * 0.5)

    linear = find_task(report, "level2/7_Linear_Sum_Dim")
    assert linear.level == 2
    instance = linear.instantiate(linear.cases[0], 3)
    assert list(instance.inputs) == ["x", "param.linear.weight", "param.linear.bias"]
    assert instance.attrs == {"dim": 1, "in_features": 12, "out_features": 5,  # and the layer's own:
                              "linear.in_features": 12, "linear.out_features": 5}
    (out,) = instance.reference()
    x, w, b = instance.inputs.values()
    torch.testing.assert_close(out, (x @ w.T + b).sum(1))


def test_kernelbench_syntax_error_names_file_and_line(tmp_path):
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "9_Broken.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x)\n        return x\n")
    (tmp_path / "level2" / "10_Fine.py").write_text(
        (FIXTURES / "kernelbench" / "KernelBench" / "level1" / "1_Scaled_Tanh.py").read_text())
    report = load_suite(tmp_path, "kernelbench")
    assert [task.id for task in report.tasks] == ["level2/10_Fine"]
    assert "9_Broken.py:5: SyntaxError" in _problem(report, "9_Broken.py")


def test_kernelbench_inputs_follow_the_seed():
    task = find_task(load_suite(FIXTURES / "kernelbench"), "level1/1_Scaled_Tanh")
    first, again, other = (task.instantiate(task.cases[0], seed).inputs["x"] for seed in (5, 5, 6))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_npukernelbench_tasks_load_and_run_without_torch_npu():
    report = load_suite(FIXTURES / "npukernelbench")
    # question/ holds the model's templates (with an api_desc.md of its own): not a task. (The fixture suite also
    # holds the Ascend route's tasks, tests/tools/ascend, which these checks leave to their own tests.)
    ids = {t.id for t in report.tasks}
    assert {"level1/Activation/FastGeluNpu", "level1/Activation/GeluCustom", "level2/Norm/GroupScaleLoop",
            "level2/Norm/RmsNormCustom", "level3/Compare/LessEqualPair", "level3/Creation/FillScalar"} <= ids
    assert not any("question" in task_id or "answer" in task_id for task_id in ids)
    assert "at least one case row" in _problem(report, "NoCases")
    for standin in ("torch_npu", "kernel_gen_ops", "framework"):
        assert standin not in sys.modules  # the stand-ins were only there while loading

    gelu = find_task(report, "level1/Activation/GeluCustom")
    assert gelu.level == 1 and gelu.category == "Activation"
    assert [c.name for c in gelu.cases] == ["case_1", "case_2", "case_3"]
    assert gelu.perf_case.name == "case_3"  # the largest
    assert gelu.cases[1]["shape"] == "[3, 5, 7]" and gelu.cases[1]["tolerance"] == 0.01  # as pandas reads it
    instance = gelu.instantiate(gelu.cases[1], 0)
    (out,) = instance.reference()
    assert out.shape == (3, 5, 7)
    torch.testing.assert_close(out, torch.nn.functional.gelu(instance.inputs["x"], approximate="tanh"))

    norm = find_task(report, "level2/Norm/RmsNormCustom")
    instance = norm.instantiate(norm.cases[0], 0)
    assert list(instance.inputs) == ["x", "gamma"] and instance.attrs == {"eps": 1e-6}
    assert "eps from the test case" in norm.description and norm.custom_check is None


def test_npukernelbench_custom_precision_checks_are_honoured():
    gelu = find_task(load_suite(FIXTURES / "npukernelbench"), "level1/Activation/GeluCustom")
    case = gelu.cases[0]
    (expected,) = gelu.instantiate(case, 0).reference()
    assert gelu.custom_check(case, (expected,), (expected + 0.005,))  # within the task's own 0.01
    assert not gelu.custom_check(case, (expected,), (expected + 0.5,))
    assert not gelu.custom_check(case, (expected,), (expected * float("nan"),))


def test_tasks_load_again_from_their_origin():
    for source in ("builtin", FIXTURES / "kernelbench", FIXTURES / "npukernelbench", FIXTURES / "multikernelbench"):
        for task in load_suite(source).tasks[:3]:
            again = load_task(task.origin, task.id)
            assert again.id == task.id and [c.name for c in again.cases] == [c.name for c in task.cases]


def test_bad_csv_row_names_file_and_line(tmp_path):
    folder = tmp_path / "level1" / "Op" / "Bad"
    (folder / "validation").mkdir(parents=True)
    source = FIXTURES / "npukernelbench" / "tasks" / "level1" / "Activation" / "GeluCustom"
    for name in ("api_desc.md", "validation/module.py", "validation/prepare_inputs.py"):
        (folder / name).write_text((source / name).read_text())
    (folder / "validation" / "test_cases.csv").write_text("case_id;shape;dtype\n1;[2, 3]\n")
    with pytest.raises(TaskLoadError, match=r"test_cases\.csv:2: 2 fields, the header has 3"):
        load_suite(tmp_path, "npukernelbench")


def test_unknown_task_and_missing_suite_are_clear_errors():
    with pytest.raises(UnknownTaskError, match="did you mean l1_relu"):
        find_task(load_suite("builtin"), "relu")
    with pytest.raises(TaskLoadError, match="no such file or directory"):
        load_suite("/no/such/suite")
    with pytest.raises(TaskLoadError, match="unknown task format"):
        load_suite("builtin", "onnx")


def test_interface_lists_inputs_outputs_and_attributes():
    task = find_task(load_suite("builtin"), "l2_add_rms_norm")
    text = describe_interface(task)
    assert "inputs[0] x: float32 [48, 256]" in text and "inputs[2] weight: float32 [256]" in text
    assert "outputs[1]: float32 [48, 256]" in text and "attr eps = 1e-06" in text


def test_interfaces_of_huge_cases_are_worked_out_without_allocating(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "1_Huge_Matmul.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n\n\n"
        "def get_inputs():\n    return [torch.randn(200_000, 100_000), torch.randn(100_000, 300_000)]\n\n\n"
        "def get_init_inputs():\n    return []\n")  # 80 GB + 120 GB of inputs: only the meta device can describe it
    task = find_task(load_suite(tmp_path), "level1/1_Huge_Matmul")
    interface = case_interface(task, task.perf_case)
    assert [spec.shape for spec in interface.inputs] == [(200_000, 100_000), (100_000, 300_000)]
    assert interface.outputs[0].shape == (200_000, 300_000) and interface.outputs[0].dtype == "float32"
    assert "inputs[1] b: float32 [100000, 300000]" in describe_interface(task)


def test_an_interface_that_cannot_be_worked_out_says_why():
    norm = find_task(load_suite(FIXTURES / "npukernelbench"), "level2/Norm/RmsNormCustom")
    assert case_interface(norm, norm.cases[0]).outputs[0].shape == (4, 32)
    builtin = find_task(load_suite("builtin"), "l3_grouped_matmul")  # bincount has no meta kernel
    described = case_interface(builtin, builtin.perf_case)
    assert described.outputs is None and "cannot be built without data" in described.note


def test_a_list_of_tensors_becomes_one_input_per_tensor(tmp_path):
    (tmp_path / "1_Sum_List.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, xs, scale):\n"
        "        return torch.stack(xs).sum(0) * scale\n\n\n"
        "def get_inputs():\n    return [[torch.randn(4, 8), torch.randn(4, 8)], 2.0]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    task = find_task(load_suite(tmp_path, "kernelbench"), "1_Sum_List")
    interface = case_interface(task, task.cases[0])
    assert [(s.name, s.shape) for s in interface.inputs] == [("xs[0]", (4, 8)), ("xs[1]", (4, 8))]
    assert interface.attrs == {"scale": 2.0}


def test_constructor_defaults_and_layer_hyperparameters_are_attributes(tmp_path):
    (tmp_path / "2_Norm.py").write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def __init__(self, features, scale=0.5):\n"
        "        super().__init__()\n        self.bn = torch.nn.BatchNorm1d(features, eps=1e-3)\n"
        "        self.scale = scale\n\n    def forward(self, x):\n        return self.bn(x) * self.scale\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\ndef get_init_inputs():\n    return [8]\n")
    task = find_task(load_suite(tmp_path, "kernelbench"), "2_Norm")
    attrs = case_interface(task, task.cases[0]).attrs
    assert attrs["features"] == 8 and attrs["scale"] == 0.5  # given, and left at its default
    assert attrs["bn.eps"] == 1e-3 and attrs["bn.momentum"] == 0.1


NPU_TASKS = FIXTURES / "npukernelbench" / "tasks"


def test_npukernelbench_levels_come_from_the_level_folder_wherever_the_suite_path_points():
    level3 = load_suite(NPU_TASKS / "level3")
    assert {(t.id, t.level) for t in level3.tasks} == {("Compare/LessEqualPair", 3), ("Creation/FillScalar", 3)}
    category = load_suite(NPU_TASKS / "level3" / "Compare")
    assert [(t.id, t.level, t.category) for t in category.tasks] == [("LessEqualPair", 3, "Compare")]
    one = load_suite(NPU_TASKS / "level3" / "Compare" / "LessEqualPair")
    assert [(t.id, t.level, t.category) for t in one.tasks] == [("LessEqualPair", 3, "Compare")]
    level2 = load_suite(NPU_TASKS / "level2")
    assert {t.level for t in level2.tasks} == {2}


def test_every_csv_row_is_one_case_as_upstream_reads_the_file():
    """Four rows (a byte-order mark before the header, CRLF line ends, no newline after the last row):
    four cases, in order, each with its row's dtype and the header's column names."""
    task = find_task(load_suite(NPU_TASKS / "level3"), "Compare/LessEqualPair")
    assert [(c.name, c.dtype) for c in task.cases] == [
        ("case_0", "float16"), ("case_1", "float16"), ("case_2", "float32"), ("case_3", "float32")]
    assert [list(c.params) for c in task.cases] == [["case_id", "shape", "dtype"]] * 4
    assert task.cases[3].params == {"case_id": 3, "shape": "[3, 5]", "dtype": "float32"}
    assert task.perf_case.name == "case_1"  # the largest row


def test_a_0_dim_tensor_argument_is_an_input_whatever_its_dtype():
    """NPUKernelBench's Fill passes `value` as a 0-dim tensor of the case's dtype and reads it with .item():
    every case has the same interface (value an input, dims an attribute), worked out for integer and bool
    cases too, where reading an integer tensor as an attribute failed on the meta device."""
    task = find_task(load_suite(NPU_TASKS / "level3"), "Creation/FillScalar")
    for case in task.cases:
        interface = case_interface(task, case)
        assert [(s.name, s.dtype, s.shape) for s in interface.inputs] == [("value", case.dtype, ())], case.name
        assert interface.outputs is not None and interface.outputs[0].dtype == case.dtype, interface.note
        assert interface.attrs == {"dims": tuple(eval(case["dims"]))}
    instance = task.instantiate(task.cases[0], 0)  # int32 7, on the CPU: the same interface
    assert list(instance.inputs) == ["value"] and int(instance.inputs["value"]) == 7
    (out,) = instance.reference()
    assert out.tolist() == [7] * 6


def test_a_reference_that_loops_in_python_is_cut_short_on_the_meta_device():
    """A reference looping over batch x groups runs thousands of operators, each slow on the meta device:
    the meta run stops at META_OP_LIMIT; a small case is then described from a CPU run, a large one (8192 x
    4 groups, 128 MiB of inputs) says its outputs are unknown and why."""
    from kernelsage.tasks.interface import META_OP_LIMIT

    task = find_task(load_suite(NPU_TASKS / "level2"), "Norm/GroupScaleLoop")
    small, large = task.cases[1], task.cases[2]  # 1024 x 4 and 8192 x 4 slices, each over the limit
    described = case_interface(task, small)
    assert described.outputs[0].shape == (1024, 8, 4) and described.note == ""
    unknown = case_interface(task, large)
    assert [s.shape for s in unknown.inputs] == [(8192, 64, 64), (8192, 4)]
    assert unknown.outputs is None and f"over {META_OP_LIMIT} operators" in unknown.note
    assert unknown.error == ""  # not a failure of the reference: only too slow to trace


def test_only_the_tasks_asked_for_are_read(monkeypatch):
    """`task_ids` loads those tasks alone (a path each in these layouts), still knows the suite's other ids
    for near names, and says why an asked-for task does not load."""
    from kernelsage.tasks import scaling

    scaled: list[str] = []
    real = scaling.scale_task
    monkeypatch.setattr(scaling, "scale_task", lambda task, budget: scaled.append(task.id) or real(task, budget))
    report = load_suite(FIXTURES / "kernelbench", task_ids=["level1/1_Scaled_Tanh"], shape_budget="1MiB")
    assert [t.id for t in report.tasks] == ["level1/1_Scaled_Tanh"] and scaled == ["level1/1_Scaled_Tanh"]
    assert report.problems == []  # the broken file beside it was never imported
    with pytest.raises(UnknownTaskError, match="did you mean level2/7_Linear_Sum_Dim"):
        find_task(load_suite(FIXTURES / "kernelbench", task_ids=["Linear_Sum"]), "Linear_Sum")
    broken = load_suite(FIXTURES / "kernelbench", task_ids=["level1/2_No_Inputs_Function"])
    with pytest.raises(TaskLoadError, match=r"no get_inputs\(\) function"):
        find_task(broken, "level1/2_No_Inputs_Function")
    npu = load_suite(NPU_TASKS, task_ids=["level3/Creation/FillScalar"])
    assert [t.id for t in npu.tasks] == ["level3/Creation/FillScalar"] and npu.problems == []


def test_a_checkout_in_static_shape_mode_makes_a_task_per_case_as_its_harness_does(tmp_path):
    """NPUKernelBench's base_config.yaml: static_shape_mode with n_case cases makes one task per case id below
    n_case (each prompted, built and judged on that case alone); without the file, one task judges them all."""
    shutil.copytree(NPU_TASKS / "level1" / "Activation" / "GeluCustom", tmp_path / "tasks" / "level1" / "GeluCustom")
    assert [t.id for t in load_suite(tmp_path / "tasks").tasks] == ["level1/GeluCustom"]
    (tmp_path / "base_config.yaml").write_text("static_shape_mode: True\nn_case: 3\nkernel_only_mode: True\n")
    report = load_suite(tmp_path / "tasks")
    # case ids 0..2 as upstream counts them: this task's csv starts at 1, so ids 1 and 2
    assert [t.id for t in report.tasks] == ["level1/GeluCustom/case_1", "level1/GeluCustom/case_2"]
    second = report.tasks[1]
    assert [c.name for c in second.cases] == ["case_2"] and second.perf_case.name == "case_2"
    again = load_task(second.origin, second.id)  # a worker loads the same one case
    assert again.id == second.id and [c.name for c in again.cases] == ["case_2"]
    assert [t.id for t in load_suite(tmp_path / "tasks", task_ids=["level1/GeluCustom/case_2"]).tasks] == [second.id]
    assert len(load_suite(tmp_path / "tasks", task_ids=["level1/GeluCustom"]).tasks) == 2
    # a base_config.yaml that is not beside a `tasks` folder is no checkout's: a user's own folder is unchanged
    shutil.copytree(tmp_path / "tasks" / "level1", tmp_path / "mine" / "level1")
    assert [len(t.cases) for t in load_suite(tmp_path / "mine").tasks] == [3]
    (tmp_path / "base_config.yaml").write_text("static_shape_mode: False\n")
    assert [len(t.cases) for t in load_suite(tmp_path / "tasks").tasks] == [3]
