"""What `python -m kernelsage.models.local_server` tells a user to set, and what docs/models.md runs: limits
that fit a CPU serving a small model (no server is started here)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from kernelsage.models.limits import ModelLimits
from kernelsage.models.local_server import settings_text

ONE_WRITING_PROMPT_S = 290  # measured: a 2,007-token prompt and its answer at ~7 tokens/s on 2 shared cores


def exported(text: str) -> dict[str, str]:
    line = next(line for line in text.splitlines() if line.strip().startswith("export "))
    return dict(word.split("=", 1) for word in shlex.split(line)[1:])


def test_the_export_line_sets_the_output_limit_and_timeouts_a_slow_cpu_needs() -> None:
    settings = exported(settings_text("SmolLM2", "http://127.0.0.1:8080/v1", context=4096, max_tokens=256))
    assert settings["KERNELSAGE_MODEL_MAX_TOKENS"] == "256" and settings["KERNELSAGE_MODEL_CONTEXT"] == "4096"
    timeout, deadline = float(settings["KERNELSAGE_MODEL_TIMEOUT"]), float(settings["KERNELSAGE_MODEL_DEADLINE"])
    assert timeout >= 4096 / 7 > ONE_WRITING_PROMPT_S  # a request filling the window, at the measured pace
    assert deadline >= 2 * timeout  # room for one retry
    assert timeout > ModelLimits().timeout  # the default (for hosted endpoints) would cut such a request off


def test_the_documented_live_test_command_sets_timeouts_that_fit_one_writing_prompt() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "models.md").read_text(encoding="utf-8")
    command = docs.split("## The live test", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    values = dict(re.findall(r"(KERNELSAGE_MODEL_\w+)=(\S+)", command))
    assert float(values["KERNELSAGE_MODEL_TIMEOUT"]) > ONE_WRITING_PROMPT_S
    assert float(values["KERNELSAGE_MODEL_DEADLINE"]) >= 2 * float(values["KERNELSAGE_MODEL_TIMEOUT"])
    assert "KERNELSAGE_MODEL_MAX_TOKENS" in values
