"""Secrets never reach the model: the values of secret-looking environment variables are cut from any
text a backend returns (compile logs, stderr tails, messages) before it is kept or shown.

Isolation already keeps the host environment out of the candidate's reach; this is the second line, for
whatever a tool or a harness error echoes back.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|DATABASE_URL|DSN",
                         re.IGNORECASE)
MIN_SECRET_LENGTH = 6  # shorter values ("1", "true") would redact ordinary text
REDACTED = "[redacted]"
R = TypeVar("R", bound=BaseModel)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of secret-looking variables, longest first (so a value containing another goes first)."""
    environ = os.environ if environ is None else environ
    values = {value for name, value in environ.items() if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every secret value replaced by `[redacted]`."""
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def _redact_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_redact_value(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: _redact_value(item, secrets) for key, item in value.items()}
    return value


def redact_record(record: R) -> R:
    """A copy of a result record with every string field redacted (the record itself when nothing is secret)."""
    secrets = secret_values()
    if not secrets:
        return record
    data = record.model_dump(mode="json")
    cleaned = _redact_value(data, secrets)
    return record if cleaned == data else type(record).model_validate(cleaned)
