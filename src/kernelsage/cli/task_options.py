"""Options every command that loads a suite or runs kernels shares: scaling shapes to a byte budget, a stricter
tolerance than the suite's, and the sandbox's memory and time limits. Each also reads its environment
variable, so a shell or CI job sets it once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

SHAPE_BUDGET_ENV = "KERNELSAGE_SHAPE_BUDGET"
MEMORY_LIMIT_ENV = "KERNELSAGE_CPU_MEMORY_MB"
TIME_LIMIT_ENV = "KERNELSAGE_CPU_TIME_LIMIT_S"
TOLERANCE_ENV = "KERNELSAGE_TOLERANCE"

ShapeBudgetOption = typer.Option(
    None, "--shape-budget", envvar=SHAPE_BUDGET_ENV,
    help="Scale each case's shapes down until its inputs and outputs fit this size (e.g. 64MiB, 1GiB); "
         "deterministic, recorded with the task. See docs/suites.md. Env: KERNELSAGE_SHAPE_BUDGET.")
ToleranceOption = typer.Option(
    None, "--tolerance", envvar=TOLERANCE_ENV, metavar="ATOL[,RTOL]",
    help="Judge with this absolute (and relative; default the same) tolerance instead of the suite's own rule "
         "(see `kernelsage tasks show`): stricter only, a looser one is refused. Integers stay exact. "
         "Env: KERNELSAGE_TOLERANCE.")
MemoryLimitOption = typer.Option(
    None, "--memory-limit", min=64, envvar=MEMORY_LIMIT_ENV,
    help="MiB of memory each sandboxed process may use (the judge, and the kernel beyond its tensors); "
         "default 8192 for the judge, 2048 for the kernel. Env: KERNELSAGE_CPU_MEMORY_MB.")
TimeLimitOption = typer.Option(
    None, "--time-limit", min=1.0, envvar=TIME_LIMIT_ENV,
    help="Seconds one verify or profile job may take on the wall clock (the kernel's CPU time may be twice "
         "that); default 60. Env: KERNELSAGE_CPU_TIME_LIMIT_S.")


def backend_options(memory_limit: int | None, time_limit: float | None) -> dict[str, Any]:
    """The limits as `get_backend(name, **options)` takes them (only those that were given)."""
    options: dict[str, Any] = {}
    if memory_limit is not None:
        options["memory_limit_mb"] = memory_limit
    if time_limit is not None:
        options["time_limit_s"] = time_limit
    return options


@contextmanager
def exported_settings(shape_budget: str | None, memory_limit: int | None, time_limit: float | None,
                      tolerance: str | None = None) -> Iterator[None]:
    """Hand the settings to code that reads them from the environment (a run's suite loader and backend,
    which the experiment builds itself): the variables the options are read from anyway. Restored after
    the block, so a later command in the same process (a notebook, a test) does not inherit them."""
    settings = ((SHAPE_BUDGET_ENV, shape_budget), (MEMORY_LIMIT_ENV, memory_limit), (TIME_LIMIT_ENV, time_limit),
                (TOLERANCE_ENV, tolerance))
    if tolerance is not None:
        from kernelsage.tasks.tolerance import parse_tolerance

        parse_tolerance(tolerance)  # a typo stops the command here, not once the run has started
    given = {name: str(value) for name, value in settings if value is not None}
    before = {name: os.environ.get(name) for name in given}
    os.environ.update(given)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
