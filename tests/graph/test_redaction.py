"""Secret values never reach the model: whatever a backend echoes back is redacted."""

from __future__ import annotations

import pytest

from kernelsage.tasks.loaders import find_task
from kernelsage.tools.evaluator import evaluate_candidate
from kernelsage.tools.redaction import REDACTED, redact, secret_values

CANARY = "sk-canary-7f3a9c21e5"


def test_only_secret_looking_variables_with_real_values_are_redacted() -> None:
    environ = {"OPENAI_API_KEY": CANARY, "DATABASE_URL": "postgresql://u:pw@db/x", "GH_TOKEN": "1",
               "PATH": "/usr/bin", "KERNELSAGE_MODEL": "openai:gpt-4o-mini"}
    assert set(secret_values(environ)) == {CANARY, "postgresql://u:pw@db/x"}
    text = f"error: key {CANARY} at postgresql://u:pw@db/x on /usr/bin"
    assert redact(text, secret_values(environ)) == f"error: key {REDACTED} at {REDACTED} on /usr/bin"


def test_a_compile_log_that_echoes_a_secret_is_redacted(monkeypatch: pytest.MonkeyPatch, cpu_backend, suite) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    source = f'#include "kernelsage_cpu.h"\n#error "{CANARY}"\n'
    evaluation = evaluate_candidate(cpu_backend, find_task(suite, "l1_relu"), {"kernel.cpp": source})
    text = evaluation.model_dump_json()
    assert evaluation.status.value == "compile_error" and CANARY not in text and REDACTED in text
