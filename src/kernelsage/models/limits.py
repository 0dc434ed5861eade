"""How long a model call may take and how much it may say: timeouts, retries, output and context limits.

Every limit has a default that suits long unattended streams and an environment variable that changes it
(README, "Configuration"). Invalid values fail at once with a message that names the variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kernelsage.errors import ModelError

MODEL_TIMEOUT_ENV = "KERNELSAGE_MODEL_TIMEOUT"  # seconds one HTTP request may take (connect and read)
MODEL_DEADLINE_ENV = "KERNELSAGE_MODEL_DEADLINE"  # seconds one call may take, retries and waits included
MODEL_ATTEMPTS_ENV = "KERNELSAGE_MODEL_ATTEMPTS"  # tries per call on timeouts, dropped connections, 429, 5xx
MODEL_MAX_TOKENS_ENV = "KERNELSAGE_MODEL_MAX_TOKENS"  # the output limit sent with every request
MODEL_TEMPERATURE_ENV = "KERNELSAGE_MODEL_TEMPERATURE"  # unset: the server's default
MODEL_CONTEXT_ENV = "KERNELSAGE_MODEL_CONTEXT"  # the model's context window in tokens; unset: unknown

CHARS_PER_TOKEN = 3.0  # a cautious estimate for code and English (real tokenizers give 3.5-4.5)


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

    def prompt_budget_chars(self) -> int | None:
        """How many prompt characters fit the window next to the answer (None: the window is unknown)."""
        if self.context_window is None:
            return None
        return max(0, int((self.context_window - self.max_tokens) * CHARS_PER_TOKEN))


def estimate_tokens(text: str) -> int:
    """A cautious token count without a tokenizer (see CHARS_PER_TOKEN)."""
    return int(len(text) / CHARS_PER_TOKEN) + 1


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
