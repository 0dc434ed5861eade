"""Whether the Ascend route runs a task as its suite's harness would: "" when it does, else one line naming
what the route lacks. Reads the task's files only (nothing is built, torch_npu is never imported), so it runs
on any machine over a whole checkout (`kernelsage tasks conform`).

NPUKernelBench: the route builds the task's own `validation/pybind.cpp` (upstream's template names replaced)
and calls `ModelNew` from `validation/module.py`, so the glue, the module and the operator they call must fit
together as upstream builds them (`suite_task`); in kernel-only mode the question's op_host is the operator's
host side. MultiKernelBench: the model writes the whole candidate (direct launch or msopgen) and kernelsage's
glue passes the reference's inputs, as its harness calls `ModelNew` with them.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelsage.tasks.model import Task
from kernelsage.tools.ascend.candidate import LayoutError, parse_op_signature
from kernelsage.tools.ascend.suite_rules import rules_for
from kernelsage.tools.ascend.suite_task import GLUE_HELPER, GLUE_MODULE, SuiteTask, read_suite_task

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_PY_COMMENT = re.compile(r"#[^\n]*")
_QUOTED_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')
_DEFINED = re.compile(r"\bm\s*\.\s*def\s*\(\s*\"(\w+)\"")
_ACLNN_CALL = re.compile(r"\bEXEC_NPU_CMD\s*\(\s*(\w+)")
_GLUE_CALL = re.compile(rf"\b{GLUE_MODULE}\s*\.\s*(\w+)\s*\(")
_NPU_ONLY = re.compile(r"\btorch_npu\s*\.\s*npu_\w+")
_SPARSE = re.compile(r"\.to_sparse\b|\bsparse_coo_tensor\b|\.coalesce\s*\(")


def ascend_conformance(task: Task) -> str:
    """'' when the Ascend route can run `task` as its suite's harness would, else one line saying what the
    route lacks for it."""
    origin = task.origin
    if origin is None:
        return "not loaded from a suite folder: the route reloads every task from its files"
    if origin.format == "npukernelbench":
        return npukernelbench_conformance(read_suite_task(Path(origin.path)), rules_for(task).kernel_only)
    if origin.format == "multikernelbench":
        return multikernelbench_conformance(Path(origin.path))
    return ""


def multikernelbench_conformance(path: Path) -> str:
    """MultiKernelBench computes its reference on the device; the route computes it on the CPU, which an
    NPU-only operator in the reference cannot run on."""
    source = _PY_COMMENT.sub("", path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else ""
    found = _NPU_ONLY.search(source)
    if found:
        return (f"the reference calls {found.group(0)}, an NPU-only operator: MultiKernelBench runs its reference "
                "on the NPU, the route on the CPU")
    return ""


def _code(source: str) -> str:
    return _COMMENT.sub("", source)


def npukernelbench_conformance(suite: SuiteTask, kernel_only: bool) -> str:
    """The checks of `ascend_conformance` for an NPUKernelBench task folder."""
    glue, module = _code(suite.glue), _PY_COMMENT.sub("", suite.module)
    if not suite.glue:
        return "no validation/pybind.cpp: the route calls NPUKernelBench operators through the task's own glue"
    if not re.search(rf"PYBIND11_MODULE\s*\(\s*{GLUE_MODULE}\b", glue):
        return f"validation/pybind.cpp defines no PYBIND11_MODULE({GLUE_MODULE}, ...), the module module.py imports"
    foreign = sorted({name for name in _QUOTED_INCLUDE.findall(glue) if name != GLUE_HELPER})
    if foreign:
        return f"validation/pybind.cpp includes {', '.join(foreign)}, which the route does not provide " \
               f"(only {GLUE_HELPER})"
    if not re.search(r"^\s*class\s+ModelNew\b", module, re.MULTILINE):
        return "validation/module.py has no ModelNew, the harness's caller of the operator"
    defined = set(_DEFINED.findall(glue))
    called = sorted(set(_GLUE_CALL.findall(module)))
    if not called:
        return f"validation/module.py's ModelNew calls nothing of {GLUE_MODULE}"
    missing = [name for name in called if name not in defined]
    if missing:
        return (f"validation/module.py calls {GLUE_MODULE}.{missing[0]}, which validation/pybind.cpp does not "
                f"define (it defines {', '.join(sorted(defined)) or 'nothing'})")
    if _SPARSE.search(module):
        return "the reference works on sparse tensors: the route hands back dense tensors only"
    if not suite.question_kernel:
        return f"no question/{suite.kernel_file}: the kernel template the prompt shows"
    if kernel_only or suite.question_host:
        problem = _host_problem(suite, kernel_only)
        if problem:
            return problem
    wanted = f"aclnn{suite.op_name}"
    for name in _ACLNN_CALL.findall(glue):
        if name != wanted:
            return (f"validation/pybind.cpp calls {name}, not the operator's {wanted}: the candidate's kernel "
                    "would not be what runs")
    return ""


def _host_problem(suite: SuiteTask, kernel_only: bool) -> str:
    if not suite.question_host:
        return f"no question/{suite.host_file}: kernel-only mode takes the operator's host side from it"
    try:
        signature = parse_op_signature(suite.question_host, suite.kernel_name)
    except LayoutError as exc:
        return f"question/{suite.host_file}: {exc}"
    if signature.op_type != suite.op_name:
        return (f"question/{suite.host_file} registers OP_ADD({signature.op_type}), not the task's operator "
                f"{suite.op_name}")
    if kernel_only and not re.search(rf"\bvoid\s+{suite.kernel_name}\s*\(", _code(suite.question_kernel)):
        return f"question/{suite.kernel_file} declares no kernel {suite.kernel_name}(...)"
    return ""
