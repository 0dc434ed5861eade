"""NPUKernelBench's harness settings, read from the checkout's own `base_config.yaml` as its harness reads them.

Upstream (6b84216) ships `kernel_only_mode: True` (the model writes op_kernel only; op_host comes from the
task's question/), `static_shape_mode: True` with `n_case: 1` (`run_multi_test.py` `create_task_objects`: one
generation, build and verdict per case id 0 .. n_case-1, each with its own prompt and work directory, the
question's TilingFunc passing no shapes to the kernel) and `eval.num_correct_trials: 1`. A checkout configured
otherwise is run as it says. A folder of NPUKernelBench-style tasks without a base_config.yaml (a user's own)
is judged kernelsage's way: every case against one kernel, in kernel-only mode unless told otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CONFIG_FILE = "base_config.yaml"


@dataclass(frozen=True)
class HarnessConfig:
    """The settings of an NPUKernelBench checkout that decide what a task is and how it is judged."""

    kernel_only: bool = True  # kernel_only_mode
    static_shapes: bool = False  # static_shape_mode: one task per case id below n_case
    n_case: int = 1
    trials: int = 1  # eval.num_correct_trials
    path: str = ""  # the base_config.yaml read, '' where there is none


def checkout_config(task_folder: Path) -> Path | None:
    """The checkout's base_config.yaml: only beside the `tasks` folder that holds `task_folder` (or that the
    folder itself holds), as upstream lays it out; a base_config.yaml anywhere else above is not the suite's."""
    roots = [folder.parent for folder in (task_folder, *task_folder.parents) if folder.name == "tasks"]
    if (task_folder / "tasks").is_dir():  # the checkout's root itself
        roots.insert(0, task_folder)
    return next((root / CONFIG_FILE for root in roots if (root / CONFIG_FILE).is_file()), None)


def read_config(text: str) -> dict[str, Any]:
    """The settings of a base_config.yaml, nested keys as `section.key`; {} for a file that is not a YAML
    mapping (the defaults then hold)."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    settings: dict[str, Any] = {}
    for key, value in loaded.items():
        if isinstance(value, dict):
            settings.update({f"{key}.{inner}": item for inner, item in value.items()})
        else:
            settings[str(key)] = value
    return settings


def _flag(settings: dict[str, Any], key: str, default: bool) -> bool:
    value = settings.get(key)
    return value if isinstance(value, bool) else default


def _count(settings: dict[str, Any], key: str, default: int) -> int:
    value = settings.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def harness_config(task_folder: Path) -> HarnessConfig:
    """The harness settings that hold for a task folder (or a suite folder): its checkout's base_config.yaml,
    or the defaults where there is none."""
    path = checkout_config(task_folder)
    if path is None:
        return HarnessConfig()
    settings = read_config(path.read_text(encoding="utf-8", errors="replace"))
    default = HarnessConfig()
    # a checkout's file that omits static_shape_mode gets upstream's value for it, not kernelsage's
    return HarnessConfig(kernel_only=_flag(settings, "kernel_only_mode", default.kernel_only),
                         static_shapes=_flag(settings, "static_shape_mode", True),
                         n_case=_count(settings, "n_case", default.n_case),
                         trials=_count(settings, "eval.num_correct_trials", default.trials), path=str(path))
