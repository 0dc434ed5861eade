"""A task's interface as the suite has it: tensor lists, optional inputs passed as None and several outputs are
shown with their structure, while the flat view the kernel ABIs use stays one tensor per input; and input
groups whose drawing needs data (MultiKernelBench's AdaIN backward) are described from a CPU draw."""

from __future__ import annotations

from pathlib import Path

from kernelsage.tasks.interface import case_interface, describe_interface, task_runs
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tasks.loaders.kernelbench import declared_group_bytes

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
STRUCTURED = FIXTURES / "npukernelbench_structured"
GROUPS = FIXTURES / "multikernelbench_groups"


def _task(root: Path, task_id: str):
    return find_task(load_suite(root, task_ids=[task_id]), task_id)


def test_a_list_of_tensors_is_one_argument_over_several_flat_inputs() -> None:
    task = _task(STRUCTURED, "level2/Foreach/ForeachMulPairs")
    interface = case_interface(task, task.cases[0])
    assert [spec.name for spec in interface.inputs] == ["xs[0]", "xs[1]", "xs[2]", "ys[0]", "ys[1]", "ys[2]"]
    assert [(a.name, a.kind, a.inputs) for a in interface.arguments] == [
        ("xs", "tensors", (0, 1, 2)), ("ys", "tensors", (3, 4, 5)), ("scale", "attr", ())]
    text = interface.describe()
    assert "[0] xs: list of 3 float16 tensors [4, 8], [4, 8], [2, 3] = inputs[0..2]" in text
    assert "[1] ys: list of 3 float16 tensors [4, 8], [4, 8], [2, 3] = inputs[3..5]" in text
    assert "  inputs[5] ys[2]: float16 [2, 3]" in text  # the flat view, as the kernel receives it
    assert "the reference returns a list of 3 tensors = outputs[0..2]" in text
    assert interface.to_dict()["returns"] == {"list": [0, 1, 2]}


def test_an_optional_input_passed_as_none_is_shown_and_takes_no_flat_slot() -> None:
    task = _task(STRUCTURED, "level2/Norm/BiasedRmsNorm")
    without, with_bias = (case_interface(task, case) for case in task.cases)
    assert [spec.name for spec in without.inputs] == ["x", "gamma"]
    assert [(a.name, a.kind) for a in without.arguments] == [("x", "tensor"), ("gamma", "tensor"), ("bias", "none"),
                                                             ("eps", "attr")]
    assert "[2] bias: None (an optional input this case leaves out" in without.describe()
    # the case that passes a bias has it as an input, and nothing structured to show for its arguments
    assert [spec.name for spec in with_bias.inputs] == ["x", "gamma", "bias"]
    assert "the reference's arguments" not in with_bias.describe()
    assert without.to_dict()["arguments"][2] == {"name": "bias", "kind": "none", "inputs": [], "attr": None}


def test_several_outputs_are_shown_as_the_reference_returns_them() -> None:
    task = _task(STRUCTURED, "level2/Norm/BiasedRmsNorm")
    text = describe_interface(task, task.cases[1])
    assert "outputs[0]: float16 [2, 3, 32]" in text and "outputs[1]: float32 [2, 3, 1]" in text
    assert "the reference returns a tuple of 2 tensors = outputs[0..1]" in text
    # a reference returning one tensor shows no structure line
    relu = _task(GROUPS, "activation/double_relu")
    assert "the reference returns" not in describe_interface(relu) and case_interface(relu, relu.cases[0]).returns == 0


def test_input_groups_whose_drawing_needs_data_are_described_from_a_cpu_draw() -> None:
    task = _task(GROUPS, "npukernelbench_level2/1_scale_shift_backward")
    assert task.draw_bytes == declared_group_bytes(GROUPS / "reference" / "npukernelbench_level2" /
                                                   "1_scale_shift_backward.json") == 1276
    interfaces = [case_interface(task, case) for case in task.cases]
    assert all(i.inputs is not None and i.outputs is not None for i in interfaces), [i.note for i in interfaces]
    assert [tuple(i.inputs[0].shape) for i in interfaces] == [(2, 3, 16), (1, 4, 8), (3, 2, 5)]
    assert interfaces[1].inputs[0].dtype == "float16" and [s.shape for s in interfaces[1].outputs] == [
        (1, 4, 8), (4,), (4,)]
    assert task_runs(task)[1] is None  # every case runs on the CPU


def test_a_cpu_draw_repeats_exactly_what_drawing_again_gives() -> None:
    task = _task(GROUPS, "npukernelbench_level2/1_scale_shift_backward")
    first = task.instantiate(task.cases[2], 7)  # draws every group
    again = task.instantiate(task.cases[2], 7)  # from the kept draw
    other = task.instantiate(task.cases[2], 8)
    assert all(first.inputs[name].equal(again.inputs[name]) for name in first.inputs)
    assert not first.inputs["x"].equal(other.inputs["x"])
    again.inputs["x"].zero_()  # a copy: the kept draw is not changed through it
    assert not task.instantiate(task.cases[2], 7).inputs["x"].eq(0).all()


def test_a_draw_the_suite_files_do_not_size_is_not_made_on_the_cpu(tmp_path: Path) -> None:
    assert declared_group_bytes(tmp_path / "missing.json") is None
    (tmp_path / "odd.json").write_text('{"inputs": [{"name": "x", "type": "tensor", "dtype": "qint4", '
                                       '"shape": [2]}]}\n')
    assert declared_group_bytes(tmp_path / "odd.json") is None
