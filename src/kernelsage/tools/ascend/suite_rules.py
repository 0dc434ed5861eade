"""Each suite's own rules for Ascend builds and verdicts, as data, with where upstream sets them.

NPUKernelBench (6b84216): `base_config.yaml` at the checkout root sets `kernel_only_mode: True` (the model
writes op_kernel only), `static_shape_mode: True` (one build and one verdict per test case: each case is its
own work directory, `framework/task_object.py` `work_path`, judged alone, `framework/batch_precision_eval.py`
line 86) and `eval.num_correct_trials: 1`; inputs are made on the NPU and the reference runs on the CPU
(`batch_precision_eval.py` lines 89-96); any NaN or inf in either output fails (`framework/utils.py`
`check_precision`) unless the task brings its own `custom_check_precision`, which replaces that check.
The checkout's own base_config.yaml is read when it is there (`kernelsage.tasks.loaders.npukernelbench_config`),
so a checkout configured otherwise is run as it says; in static-shape mode the loader makes one task per case
id. A task folder without one is judged kernelsage's way: kernel-only, every case against one kernel.

MultiKernelBench (460a972): the reference runs on the device, on the same inputs (`utils/correctness.py`
`execute_template`), `num_correct_trials = 5` (`config.py`), `torch.allclose(atol=1e-4, rtol=1e-4)` (NaN
never equals NaN: any NaN fails; inf matches inf); its msopgen route installs the package without
`--install-path` and puts `opp/vendors/customize/op_api/lib` on LD_LIBRARY_PATH
(`utils/ascend_compile_pipeline.py`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from kernelsage.tasks.loaders.npukernelbench_config import harness_config
from kernelsage.tasks.model import Task

KERNEL_ONLY, FULL = "kernel_only", "full"
MODE_ENV = "KERNELSAGE_ASCEND_TEMPLATE_MODE"  # kernel_only | full: the user's choice over the suite's


@dataclass(frozen=True)
class SuiteRules:
    """How one suite builds and judges an Ascend candidate."""

    suite: str
    kernel_only: bool = False  # the model writes op_kernel only; op_host comes from the task's question/
    per_case: bool = False  # upstream builds and judges every test case on its own (static_shape_mode)
    trials: int = 3  # correctness trials per case
    nonfinite_fails: str = ""  # "nan_inf": any NaN or inf fails; "nan": any NaN fails; "": as the reference
    reference_on_device: bool = False  # the reference is computed on the NPU (else on the CPU)
    source: str = ""


KERNELSAGE_RULES = SuiteRules(suite="kernelsage", source="kernelsage's own (METHOD §8)")
NPUKERNELBENCH_RULES = SuiteRules(
    suite="NPUKernelBench", kernel_only=True, per_case=True, trials=1, nonfinite_fails="nan_inf",
    source="NPUKernelBench base_config.yaml (kernel_only_mode, static_shape_mode, eval.num_correct_trials), "
           "framework/utils.py check_precision")
MULTIKERNELBENCH_RULES = SuiteRules(
    suite="MultiKernelBench", trials=5, nonfinite_fails="nan", reference_on_device=True,
    source="MultiKernelBench config.py num_correct_trials, utils/correctness.py execute_template")


def npukernelbench_rules(task_folder: Path, mode: str = "") -> SuiteRules:
    """NPUKernelBench's rules for a task folder: its checkout's base_config.yaml where present
    (`kernelsage.tasks.loaders.npukernelbench_config`), else the defaults; `mode` (kernel_only | full)
    overrides the template mode."""
    config = harness_config(task_folder)
    rules = dataclasses.replace(NPUKERNELBENCH_RULES, kernel_only=config.kernel_only,
                                per_case=config.static_shapes)
    if config.path:
        rules = dataclasses.replace(rules, trials=config.trials, source=f"{config.path} ({rules.source})")
    if mode:
        if mode not in (KERNEL_ONLY, FULL):
            raise ValueError(f"template mode {mode!r} is not one of {KERNEL_ONLY}, {FULL}")
        rules = dataclasses.replace(rules, kernel_only=mode == KERNEL_ONLY)
    return rules


def rules_for(task: Task, mode: str = "") -> SuiteRules:
    """The rules that build and judge `task` on the Ascend route (by the suite it was loaded from)."""
    origin = task.origin
    if origin is not None and origin.format == "npukernelbench":
        return npukernelbench_rules(Path(origin.path), mode)
    if origin is not None and origin.format == "multikernelbench":
        return MULTIKERNELBENCH_RULES
    return KERNELSAGE_RULES
