"""The correctness rule of METHOD §8 and the poison that reveals unwritten outputs."""

from __future__ import annotations

import pytest
import torch

from kernelsage.tasks.model import Tolerance
from kernelsage.tools.compare import all_close, classify, compare_output, poison, poisoned_mask, same_bytes
from kernelsage.tools.results import Status

TOL = Tolerance(1e-3, 1e-3)


def test_an_element_fails_only_when_both_errors_exceed_tolerance():
    expected = torch.tensor([1000.0, 1e-6, 1.0])
    # large absolute but small relative error; small absolute but large relative error; both large
    actual = torch.tensor([1000.5, 2e-6, 1.5])
    result = compare_output(expected, actual, TOL, trial=0)
    assert result.n_mismatch == 1
    assert result.mismatches[0].index == [2]
    assert result.max_abs == pytest.approx(0.5) and result.max_rel == pytest.approx(1.0)
    assert classify([result]) is Status.WRONG_RESULT


def test_nan_or_inf_where_the_reference_is_finite_fails():
    expected = torch.tensor([1.0, 2.0, 3.0])
    result = compare_output(expected, torch.tensor([1.0, float("nan"), float("inf")]), TOL, trial=0)
    assert result.n_mismatch == 2 and result.n_nonfinite == 2
    assert classify([result]) is Status.NAN_INF


def test_non_finite_reference_values_must_be_reproduced():
    expected = torch.tensor([float("nan"), float("inf"), -float("inf")])
    assert compare_output(expected, expected.clone(), TOL, trial=0).n_mismatch == 0
    assert compare_output(expected, torch.tensor([0.0, float("inf"), float("inf")]), TOL, 0).n_mismatch == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.int8, torch.uint8, torch.bool])
def test_poison_marks_unwritten_elements_of_every_dtype(dtype):
    for trial in range(3):
        output = torch.empty(10, dtype=dtype)
        poison(output, trial)
        output[:6] = torch.ones(6, dtype=dtype)
        expected = torch.ones(10, dtype=dtype)
        assert poisoned_mask(output, trial).tolist() == [False] * 6 + [True] * 4
        result = compare_output(expected, output, Tolerance(0.0, 0.0), trial)
        assert result.n_unwritten == 4 and result.n_mismatch == 4
        assert classify([result]) is Status.PARTIAL_WRITE


def test_a_nan_computed_by_the_kernel_is_not_mistaken_for_the_poison():
    output = torch.empty(3)
    poison(output, 0)
    output[:] = float("nan")  # the ordinary quiet NaN arithmetic produces
    result = compare_output(torch.ones(3), output, TOL, trial=0)
    assert result.n_unwritten == 0 and classify([result]) is Status.NAN_INF


def test_integer_outputs_must_match_exactly_and_indices_are_unravelled():
    expected = torch.arange(12).reshape(3, 4)
    actual = expected.clone()
    actual[2, 1] += 1
    result = compare_output(expected, actual, Tolerance(0.0, 0.0), trial=1)
    assert result.n_mismatch == 1
    assert result.mismatches[0].index == [2, 1]
    assert (result.mismatches[0].expected, result.mismatches[0].actual) == (9.0, 10.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_the_quick_full_check_never_passes_a_finite_value_for_an_infinite_reference(dtype):
    # rtol * |inf| is inf: a bound taken as is would let any finite value (or the other infinity) pass
    tolerance = Tolerance(atol=1e-5, rtol=1e-5)
    expected = torch.tensor([1.0, float("inf"), -2.0, float("-inf")], dtype=dtype)
    for wrong in ([1.0, 3.0e4, -2.0, float("-inf")], [1.0, float("inf"), -2.0, float("inf")]):
        actual = torch.tensor(wrong, dtype=dtype)
        assert all_close(expected, actual, tolerance) is not True
        assert compare_output(expected, actual, tolerance, 0).n_mismatch == 1
    assert all_close(expected, expected.clone(), tolerance) is True
    close = torch.tensor([1.0 + 1e-6, float("inf"), -2.0, float("-inf")], dtype=dtype)
    assert all_close(expected, close, tolerance) in (True, None)  # None: compare_output decides, and passes it
    assert compare_output(expected, close, tolerance, 0).n_mismatch == 0


def test_same_bytes_compares_bits_not_values():
    values = torch.randn(1000)
    assert same_bytes(values, values.clone())
    changed = values.clone()
    changed[999] = torch.nextafter(changed[999], torch.tensor(2.0))  # the last element, by one ulp
    assert not same_bytes(values, changed)
    assert not same_bytes(torch.tensor([0.0]), torch.tensor([-0.0]))  # equal values, other bits
    nan = torch.tensor([float("nan")])
    assert same_bytes(nan, nan.clone()) and not torch.equal(nan, nan.clone())
    assert same_bytes(values[::2], values.clone()[::2])  # views are compared by their elements
    assert not same_bytes(values, values.double()) and not same_bytes(values, values[:10])
