"""The profile's defences against state kept between calls: element-wise fresh contents, the structures that keep a
scalar blend, the unseen-instance rule, and integer poison that a task can produce."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelsage.tasks.model import Tolerance
from kernelsage.tools.compare import compare_output, poison, poison_value
from kernelsage.tools.judging.contents import ELEMENTWISE, WHOLE, Draw, FreshContents, blend_kind
from kernelsage.tools.judging.instances import Prepared
from kernelsage.tools.timing import MIN_UNSEEN, TimedCall, call_ratios, slower_on_unseen


def sets_of(make, count=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [make(generator) for _ in range(count)]


def prepared_of(*inputs_per_set: list[torch.Tensor]) -> list[Prepared]:
    return [Prepared(instance=None, inputs=list(inputs), expected=(inputs[0].sum(),), tolerances=[],  # type: ignore[arg-type]
                     input_places=[], output_places=[]) for inputs in inputs_per_set]


# which inputs keep a scalar blend -------------------------------------------------------------------------------

def test_plain_random_inputs_and_shared_zeros_are_blended_element_by_element():
    assert blend_kind(sets_of(lambda g: torch.randn(64, 100, generator=g))) == ELEMENTWISE
    assert blend_kind(sets_of(lambda g: torch.randn(50, 50, generator=g).tril())) == ELEMENTWISE  # zeros stay zero
    assert blend_kind(sets_of(lambda g: torch.rand(7, generator=g))) == ELEMENTWISE


@pytest.mark.parametrize("structure", ["symmetric", "sorted", "softmax rows", "unit rows", "integers"])
def test_inputs_whose_structure_an_elementwise_blend_breaks_keep_a_scalar_blend(structure):
    def make(g):
        x = torch.randn(32, 32, generator=g)
        return {"symmetric": x + x.T, "sorted": x.sort(-1).values, "softmax rows": x.softmax(-1),
                "unit rows": torch.nn.functional.normalize(x, dim=-1),
                "integers": torch.randint(-5, 5, (32, 32), generator=g).float()}[structure]
    assert blend_kind(sets_of(make)) == WHOLE


def test_a_structure_only_some_sets_show_is_chance_not_structure():
    generator = torch.Generator().manual_seed(1)
    sets = [torch.randn(8, 8, generator=generator) for _ in range(3)]
    sets[0] = sets[0] + sets[0].T
    assert blend_kind(sets) == ELEMENTWISE


# element-wise contents --------------------------------------------------------------------------------------------

def test_elementwise_contents_do_not_lie_in_a_space_a_few_calls_span():
    # the interpolation attack: with one weight per tensor, every call's inputs are a + w (b - a), so three calls
    # determine every later one; element by element, 20 calls span 20 dimensions
    a_sets = sets_of(lambda g: torch.randn(40, 50, generator=g))
    prepared = prepared_of(*[[a.clone()] for a in a_sets])
    contents = FreshContents(prepared, [0], [ELEMENTWISE])
    rng = random.Random(5)
    calls = []
    for _ in range(20):
        contents.blend(0, contents.draw(0))
        calls.append((prepared[0].inputs[0] - a_sets[0]).reshape(-1).clone())
    assert torch.linalg.matrix_rank(torch.stack(calls).double(), rtol=1e-4) == 20
    prepared = prepared_of(*[[a.clone()] for a in a_sets])
    whole = FreshContents(prepared, [0], [WHOLE])
    same_partner = []
    for _ in range(20):
        whole.blend(0, Draw(partner=1, offset=rng.randrange(100), weight=rng.uniform(0.25, 0.75)))
        same_partner.append((prepared[0].inputs[0] - a_sets[0]).reshape(-1).clone())
    assert torch.linalg.matrix_rank(torch.stack(same_partner).double(), rtol=1e-4) == 1  # what the attack used


def test_elementwise_blends_stay_between_their_sets_and_keep_relations_between_inputs():
    generator = torch.Generator().manual_seed(2)
    sets = []
    for _ in range(2):
        low = torch.randn(30, 30, generator=generator)
        sets.append([low, low + torch.rand(30, 30, generator=generator)])  # high >= low, element by element
    prepared = prepared_of(*[[t.clone() for t in inputs] for inputs in sets])
    contents = FreshContents(prepared, [0, 1], [ELEMENTWISE, ELEMENTWISE])
    for _ in range(10):
        contents.blend(0, contents.draw(0))
        low, high = prepared[0].inputs
        assert bool(torch.all(high >= low))
        bounds = torch.stack([sets[0][0], sets[1][0]])
        assert bool(torch.all(low >= bounds.min(0).values)) and bool(torch.all(low <= bounds.max(0).values))


def test_half_precision_inputs_are_blended_in_float32_and_stored_in_their_dtype():
    sets = sets_of(lambda g: torch.randn(16, 16, generator=g).half(), count=2)
    prepared = prepared_of(*[[t.clone()] for t in sets])
    contents = FreshContents(prepared, [0], [ELEMENTWISE])
    contents.blend(0, Draw(partner=1, offset=17, weight=0.5))
    blended = prepared[0].inputs[0]
    assert blended.dtype == torch.float16 and not torch.equal(blended, sets[0])
    contents.take(0, 0)
    assert torch.equal(prepared[0].inputs[0], sets[0])


# the unseen-instance rule -----------------------------------------------------------------------------------------

def noisy(rng: random.Random, n: int, centre: float = 1.0, spike: float = 0.05) -> list[float]:
    """Per-call ratios of a kernel that treats every call alike: log-normal noise with occasional 3x spikes."""
    return [centre * rng.lognormvariate(0, 0.2) * (3.0 if rng.random() < spike else 1.0) for _ in range(n)]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), unseen=st.integers(MIN_UNSEEN, 16))
def test_a_kernel_that_treats_every_call_alike_is_not_flagged(seed, unseen):
    rng = random.Random(seed)
    assert slower_on_unseen(noisy(rng, 100 - unseen), noisy(rng, unseen)) is None


@pytest.mark.parametrize("share_fast", [0.55, 0.7, 1.0])
def test_a_kernel_fast_only_on_what_it_has_seen_is_flagged(share_fast):
    rng = random.Random(7)
    seen = [r * (0.05 if rng.random() < share_fast else 1.0) for r in noisy(rng, 96)]
    slowdown = slower_on_unseen(seen, noisy(rng, 4))
    assert slowdown is not None and slowdown > 1.5


def test_a_kernel_that_gains_on_fewer_than_half_of_its_calls_moves_no_median_and_is_not_flagged():
    rng = random.Random(3)
    seen = [r * (0.05 if rng.random() < 0.3 else 1.0) for r in noisy(rng, 92)]
    assert slower_on_unseen(seen, noisy(rng, 8)) is None


def test_an_unseen_call_is_held_against_its_neighbours_references_not_its_own():
    # the reference of an unseen call ran on a freshly made instance: 25x slow (it would hide a kernel's state)
    # or 2x fast (it flagged honest kernels); the seen calls beside it say what the reference takes
    calls = [TimedCall(n, 1.0, 2.0 if n < 10 else 4.0) for n in range(20) if n not in (4, 15)]
    calls += [TimedCall(4, 1.0, 50.0, unseen=True), TimedCall(15, 1.0, 2.0, unseen=True)]
    seen, unseen = call_ratios(calls)
    assert seen == [0.5] * 9 + [0.25] * 9  # seen calls keep their own reference
    assert unseen == [pytest.approx(0.5), pytest.approx(0.25)]  # 4 seen neighbours each: 2, 2, 2, 2 / 4, 4, 4, 4
    assert call_ratios([TimedCall(0, 1.0, 2.0, unseen=True)]) == ([], [0.5])  # no seen call: its own


def test_too_few_unseen_calls_decide_nothing():
    assert slower_on_unseen([0.01] * 50, [1.0] * (MIN_UNSEEN - 1)) is None


# poison a task can produce ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_an_integer_answer_equal_to_the_poison_is_not_called_unwritten(dtype):
    _, value = poison_value(dtype, 0)
    expected = torch.tensor([value, 1, value, 2], dtype=dtype)
    actual = torch.empty_like(expected)
    poison(actual, 0)
    actual[1], actual[3] = 1, 2  # the kernel writes what differs from the buffer's content, leaves the rest
    comparison = compare_output(expected, actual, Tolerance(atol=0, rtol=0), 0)
    assert comparison.n_mismatch == 0 and comparison.n_unwritten == 0
    actual[1] = value  # a real unwritten element still counts
    assert compare_output(expected, actual, Tolerance(atol=0, rtol=0), 0).n_unwritten == 1
