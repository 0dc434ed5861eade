"""How long a model call may take and how much it may say: timeouts, retries, output and context limits.

Every limit has a default that suits long unattended streams and an environment variable that changes it
(README, "Configuration"). Invalid values fail at once with a message that names the variable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from kernelsage.errors import ModelError

MODEL_TIMEOUT_ENV = "KERNELSAGE_MODEL_TIMEOUT"  # seconds one HTTP request may take (connect and read)
MODEL_DEADLINE_ENV = "KERNELSAGE_MODEL_DEADLINE"  # seconds one call may take, retries and waits included
MODEL_ATTEMPTS_ENV = "KERNELSAGE_MODEL_ATTEMPTS"  # tries per call on timeouts, dropped connections, 429, 5xx
MODEL_MAX_TOKENS_ENV = "KERNELSAGE_MODEL_MAX_TOKENS"  # the output limit sent with every request
MODEL_TEMPERATURE_ENV = "KERNELSAGE_MODEL_TEMPERATURE"  # unset: the server's default
MODEL_CONTEXT_ENV = "KERNELSAGE_MODEL_CONTEXT"  # the model's context window in tokens; unset: unknown

# The fewest characters per token measured on kernelsage's prompts (SmolLM2's tokenizer: 2.9-3.05; larger
# vocabularies give 3.5-4.5): counting with it overestimates a prompt's tokens, never underestimates them.
CHARS_PER_TOKEN = 2.9
# The share of the window a prompt is never planned into: the count is an estimate, and the chat template
# adds its own tokens around every message.
WINDOW_MARGIN = 0.05


@dataclass(frozen=True, kw_only=True)
class ModelLimits:
    timeout: float = 120.0
    deadline: float = 600.0
    attempts: int = 4
    max_tokens: int = 4096
    temperature: float | None = None
    context_window: int | None = None

    @classmethod
    def from_env(cls) -> ModelLimits:
        """The limits set in the environment, defaults for the rest."""
        default = cls()
        return cls(
            timeout=_number(MODEL_TIMEOUT_ENV, default.timeout, float),
            deadline=_number(MODEL_DEADLINE_ENV, default.deadline, float),
            attempts=int(_number(MODEL_ATTEMPTS_ENV, default.attempts, int)),
            max_tokens=int(_number(MODEL_MAX_TOKENS_ENV, default.max_tokens, int)),
            temperature=_optional(MODEL_TEMPERATURE_ENV, float, minimum=0.0),
            context_window=_optional_int(MODEL_CONTEXT_ENV),
        )

    def prompt_budget_tokens(self) -> int | None:
        """How many prompt tokens fit the window next to the answer, less the margin (None: unknown window)."""
        if self.context_window is None:
            return None
        return max(0, int(self.context_window * (1 - WINDOW_MARGIN)) - self.max_tokens)

    def prompt_budget_chars(self) -> int | None:
        """How many prompt characters fit the window next to the answer (None: the window is unknown)."""
        tokens = self.prompt_budget_tokens()
        return None if tokens is None else int(tokens * CHARS_PER_TOKEN)


def truncation_advice() -> str:
    """What to do when answers stop at the output limit (`finish_reason: length`): name the setting."""
    try:
        limit = ModelLimits.from_env().max_tokens
    except ModelError:  # a bad value is reported where it is read; the advice still names the setting
        limit = ModelLimits().max_tokens
    return (f"the answers were cut off at the output limit ({MODEL_MAX_TOKENS_ENV}={limit} tokens): raise "
            f"{MODEL_MAX_TOKENS_ENV}, within what the model may answer")


def estimate_tokens(text: str) -> int:
    """A cautious token count without a tokenizer (see CHARS_PER_TOKEN)."""
    return tokens_for_chars(len(text))


def tokens_for_chars(chars: int) -> int:
    """A cautious token count for `chars` characters of prompt."""
    return int(chars / CHARS_PER_TOKEN) + 1


def _number(name: str, default: float, kind: type) -> float:
    value = _optional(name, kind, minimum=1e-9)
    return default if value is None else value


def _optional_int(name: str) -> int | None:
    value = _optional(name, int, minimum=1)
    return None if value is None else int(value)


def _optional(name: str, kind: type, *, minimum: float) -> float | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise ModelError(f"{name}={raw!r} is not a {'whole ' if kind is int else ''}number: "
                         f"set it to e.g. {'4096' if kind is int else '120'} or unset it") from None
    if value < minimum:
        raise ModelError(f"{name}={raw!r} must be at least {minimum:g}: set a larger value or unset it")
    return value


# When the current model call must end (time.monotonic()), set by the retry layer for the whole call. A
# request reads it to bound one attempt by what is left of the call's deadline: a request timeout alone
# would let one attempt run past it (tenacity checks the deadline only between attempts).
_call_ends: ContextVar[float | None] = ContextVar("kernelsage_model_call_ends", default=None)


@contextmanager
def call_deadline(seconds: float) -> Iterator[None]:
    """Within the block, `seconds_left()` counts down from `seconds` (an inner block cannot extend it)."""
    ends = time.monotonic() + seconds
    outer = _call_ends.get()
    token = _call_ends.set(ends if outer is None else min(ends, outer))
    try:
        yield
    finally:
        _call_ends.reset(token)


def seconds_left() -> float | None:
    """What is left of the current model call's deadline (None outside `call_deadline`)."""
    ends = _call_ends.get()
    return None if ends is None else ends - time.monotonic()
