"""What the msopgen route builds for a task that brings its own glue (NPUKernelBench's validation/pybind.cpp):
the operator's sources as upstream assembles them (kernel-only: the model's op_kernel with the tiling argument
added, the question's op_host; full: the model's op_host and op_kernel) and the task's glue."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelsage.tasks.model import Task
from kernelsage.tools.ascend.candidate import LayoutError, classify_layout
from kernelsage.tools.ascend.suite_rules import rules_for
from kernelsage.tools.ascend.suite_task import SuiteTask, kernel_only_kernel, read_suite_task


@dataclass(frozen=True)
class SuiteBuild:
    """The operator's files to build, and the task's glue (pybind.cpp, template names replaced)."""

    op: str
    files: dict[str, str]
    glue: str


def suite_task_of(task: Task | None) -> SuiteTask | None:
    """The task's own glue and question files, for a task whose folder has validation/pybind.cpp."""
    if task is None or task.origin is None or task.origin.format != "npukernelbench":
        return None
    suite = read_suite_task(Path(task.origin.path))
    return suite if suite.glue else None


def candidate_files_for(suite: SuiteTask, kernel_only: bool) -> tuple[str, ...]:
    """The files the model writes for a suite task (kernel-only: the kernel alone)."""
    if kernel_only:
        return (suite.kernel_file,)
    return (suite.host_file, suite.kernel_file)


def suite_build(files: dict[str, str], task: Task, mode: str = "") -> SuiteBuild | None:
    """The build of a candidate for `task` through the task's own glue, or None when the task has none;
    LayoutError when the candidate's files are not what the task's mode asks for."""
    suite = suite_task_of(task)
    if suite is None:
        return None
    kernel_only = rules_for(task, mode).kernel_only
    expected = candidate_files_for(suite, kernel_only)
    if sorted(files) != sorted(expected) and not (not kernel_only and set(expected) <= set(files)):
        hint = (f"the host side is the task's question/{suite.host_file}; KERNELSAGE_ASCEND_TEMPLATE_MODE=full "
                "to write it too") if kernel_only else f"optionally op_host/{suite.kernel_name}_tiling.h"
        raise LayoutError(f"{'kernel-only' if kernel_only else 'full'} mode: write {', '.join(expected)} "
                          f"({hint}); got {sorted(files)}")
    if kernel_only:
        operator = {suite.host_file: suite.question_host,
                    suite.kernel_file: kernel_only_kernel(files[suite.kernel_file])}
    else:
        classify_layout(files)  # the full candidate's own layout rules (one op, allowed names)
        operator = dict(files)
    return SuiteBuild(op=suite.kernel_name, files=operator, glue=suite.glue)
