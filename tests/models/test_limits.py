"""The prompt budget a configured context window leaves: an estimate that errs on the side of not fitting."""

from __future__ import annotations

from kernelsage.models.limits import ModelLimits, estimate_tokens


def test_a_prompt_at_the_densest_measured_tokenization_that_fills_the_window_does_not_fit() -> None:
    limits = ModelLimits(context_window=8192, max_tokens=1024)
    densest = 2.9  # characters per token measured on kernelsage's prompts (SmolLM2: 2.9-3.05)
    filling = int((8192 - 1024) * densest)  # exactly the window next to the answer: a server would reject it
    assert limits.prompt_budget_chars() < filling
    assert limits.prompt_budget_chars() / densest <= 0.95 * 8192 - 1024  # a margin of the window stays free
    assert estimate_tokens("x" * filling) >= 8192 - 1024  # and the estimate never counts it as smaller


def test_an_unknown_window_sets_no_budget() -> None:
    assert ModelLimits(context_window=None).prompt_budget_chars() is None
    assert ModelLimits(context_window=1000, max_tokens=4096).prompt_budget_chars() == 0
