"""Scaling a suite's shapes down to a byte budget: deterministic, recorded, rebuilt the same in a worker."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from kernelsage.errors import ConfigurationError
from kernelsage.tasks.loaders import find_task, load_suite, load_task
from kernelsage.tasks.model import TaskOrigin
from kernelsage.tasks.scaling import case_bytes, parse_bytes, replace_values, shape_values

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# A KernelBench-style file whose full size (about 17 GiB) could never be allocated here.
BIG_CONV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


batch_size = 64
in_channels = 32
out_channels = 64
height = width = 1024
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''


@pytest.fixture
def big_suite(tmp_path: Path) -> Path:
    (tmp_path / "KernelBench" / "level2").mkdir(parents=True)
    (tmp_path / "KernelBench" / "level2" / "3_Big_Conv.py").write_text(BIG_CONV)
    return tmp_path


def test_budgets_read_like_sizes():
    assert parse_bytes("64MiB") == 64 << 20 and parse_bytes("1.5GiB") == 3 << 29
    assert parse_bytes("500MB") == 500_000_000 and parse_bytes("4096") == 4096
    for bad in ("lots", "-3MiB", "12 parsecs", "0", "0.5"):
        with pytest.raises(ConfigurationError, match="shape budget"):
            parse_bytes(bad)


def test_sizes_are_found_and_replaced_inside_shape_strings():
    params = {"case_id": 40, "shape": "[32, 1024]", "m": 1024, "axis": -1, "dtype": "float32", "groups": [[64, 8]]}
    assert shape_values(params) == [1024, 64, 32]  # case ids and small values are not sizes
    scaled = replace_values(params, {1024: 256, 64: 32})
    assert scaled == {"case_id": 40, "shape": "[32, 256]", "m": 256, "axis": -1, "dtype": "float32",
                      "groups": [[32, 8]]}


def test_a_kernelbench_case_is_scaled_to_the_budget_and_still_computes(big_suite: Path):
    full = find_task(load_suite(big_suite), "level2/3_Big_Conv")
    assert full.cases[0].params == {"batch_size": 64, "in_channels": 32, "height": 1024, "width": 1024,
                                    "out_channels": 64, "kernel_size": 3}
    assert case_bytes(full, full.cases[0]) > 16 << 30  # worked out on the meta device, never allocated

    task = find_task(load_suite(big_suite, shape_budget="4MiB"), "level2/3_Big_Conv")
    (scaling,) = task.origin.scaling.cases
    assert scaling.bytes_after <= 4 << 20 < scaling.bytes_before and not scaling.note
    params = task.cases[0].params
    assert params["kernel_size"] == 3  # below the smallest scaled size: the operator keeps its meaning
    assert params["height"] == params["width"] < 1024  # one size, shared by two names, stays shared
    instance = task.instantiate(task.cases[0], 0)
    x = instance.inputs["x"]
    assert tuple(x.shape) == (params["batch_size"], params["in_channels"], params["height"], params["width"])
    (out,) = instance.reference()
    weight, bias = instance.inputs["param.conv.weight"], instance.inputs["param.conv.bias"]
    torch.testing.assert_close(out, torch.relu(torch.nn.functional.conv2d(x, weight, bias, padding=1)))
    # Deterministic: the same budget gives the same cases.
    again = find_task(load_suite(big_suite, shape_budget="4MiB"), "level2/3_Big_Conv")
    assert again.cases == task.cases and again.origin.scaling == task.origin.scaling


def test_a_worker_rebuilds_the_recorded_cases_from_the_origin(big_suite: Path):
    task = find_task(load_suite(big_suite, shape_budget="4MiB"), "level2/3_Big_Conv")
    # The backend sends the origin as JSON; the worker loads the task again from it, without a budget.
    origin = TaskOrigin(**json.loads(json.dumps(dataclasses.asdict(task.origin))))
    again = load_task(origin, task.id)
    assert again.cases == task.cases and again.perf_case == task.perf_case
    assert tuple(again.instantiate(again.cases[0], 1).inputs["x"].shape) == tuple(
        task.instantiate(task.cases[0], 1).inputs["x"].shape)


def test_npukernelbench_rows_are_scaled_in_their_csv_form(monkeypatch):
    monkeypatch.setenv("KERNELSAGE_SHAPE_BUDGET", "16KiB")  # what --shape-budget sets for a run
    task = find_task(load_suite(FIXTURES / "npukernelbench"), "level1/Activation/GeluCustom")
    by_name = {case.name: case for case in task.cases}
    assert by_name["case_1"]["shape"] == "[8, 16]"  # fits already: unchanged
    assert by_name["case_3"]["shape"] != "[64, 128]"
    shape = json.loads(by_name["case_3"]["shape"])
    assert 4 * 2 * shape[0] * shape[1] <= 16 << 10  # input and output of float32
    assert tuple(task.instantiate(by_name["case_3"], 0).inputs["x"].shape) == tuple(shape)
    assert task.perf_case.name == "case_3"  # upstream's choice, scaled


def test_input_groups_over_the_budget_are_left_out():
    full = find_task(load_suite(FIXTURES / "multikernelbench"), "npukernelbench_level2/3_layer_norm")
    sizes = {case.name: case_bytes(full, case) for case in full.cases}
    budget = min(sizes.values())
    task = find_task(load_suite(FIXTURES / "multikernelbench", shape_budget=budget),
                     "npukernelbench_level2/3_layer_norm")
    kept = [case.name for case in task.cases]
    assert kept == [name for name, size in sizes.items() if size <= budget]
    assert set(task.origin.scaling.dropped) == set(sizes) - set(kept) and task.perf_case.name in kept
