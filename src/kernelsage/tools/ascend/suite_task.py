"""An NPUKernelBench task folder as its harness builds it (read, never copied; NPUKernelBench 6b84216):

- the operator's names come from the folder: `op_name` is the folder name up to its first '_', `kernel_name`
  its snake_case (`framework/task_object.py` `_parse_problem_definition`);
- `validation/pybind.cpp` is the task's own Python glue (module `kernel_gen_ops`), built with two template
  names replaced: `aclnnCustomOp` by `aclnn<op_name>` and `custom_pybind_api` by `<kernel_name>`
  (`framework/batch_compile.py` `prepare_source_files`);
- `validation/module.py` holds `Model` (the reference) and `ModelNew` (which calls `kernel_gen_ops.<kernel>`);
- in kernel-only mode the model writes `op_kernel/<kernel>.cpp` only: `op_host/<kernel>.cpp` is the
  question's, and every `GM_ADDR workspace` of the model's kernel becomes `GM_ADDR workspace, GM_ADDR tiling`
  (`framework/task_object.py` `parse_gen_content`). The prompt shows the question's kernel with everything
  after `workspace` up to the closing parenthesis cut (`kernel_generator/generate_codes_with_sft.py`).

Pure functions of the files; nothing is built here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelsage.tools.ascend.candidate import snake_case_words

PYBIND = "validation/pybind.cpp"
MODULE = "validation/module.py"
GLUE_MODULE = "kernel_gen_ops"  # the module name the suite's pybind.cpp and module.py use
# The glue's header: upstream's own copy of torch_npu's aclnn calling helpers. kernelsage ships a header of
# the same name that includes torch_npu's op-plugin helper instead (`pytorch_npu_helper.hpp` in this package).
GLUE_HELPER = "pytorch_npu_helper.hpp"
WORKSPACE = "GM_ADDR workspace"
WORKSPACE_AND_TILING = "GM_ADDR workspace, GM_ADDR tiling"
_PROMPT_SIGNATURE_TAIL = re.compile(r"(workspace[^)]*\))")


def op_name_of(folder: Path) -> str:
    """The operator type of a task folder (its name up to the first '_')."""
    return folder.name.split("_")[0]


def substitute_glue(source: str, op_name: str, kernel_name: str) -> str:
    """The task's pybind.cpp with upstream's template names replaced (order as upstream: aclnnCustomOp first)."""
    return source.replace("aclnnCustomOp", f"aclnn{op_name}").replace("custom_pybind_api", kernel_name)


def kernel_only_kernel(kernel_source: str) -> str:
    """The model's op_kernel as upstream builds it in kernel-only mode (the tiling argument added)."""
    return kernel_source.replace(WORKSPACE, WORKSPACE_AND_TILING)


def kernel_template_for_prompt(question_kernel: str) -> str:
    """The question's kernel as upstream's kernel-only prompt shows it: the signature ends at `workspace)`."""
    return _PROMPT_SIGNATURE_TAIL.sub("workspace)", question_kernel)


@dataclass(frozen=True)
class SuiteTask:
    """What a task folder gives the Ascend route (absent files are '')."""

    folder: Path
    op_name: str
    kernel_name: str
    glue: str  # validation/pybind.cpp with the template names replaced
    module: str  # validation/module.py
    question_host: str  # question/op_host/<kernel>.cpp
    question_kernel: str  # question/op_kernel/<kernel>.cpp

    @property
    def host_file(self) -> str:
        return f"op_host/{self.kernel_name}.cpp"

    @property
    def kernel_file(self) -> str:
        return f"op_kernel/{self.kernel_name}.cpp"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def read_suite_task(folder: Path) -> SuiteTask:
    """The task folder's glue, module and question files, named as upstream names them."""
    op_name = op_name_of(folder)
    kernel = snake_case_words(op_name)
    return SuiteTask(folder=folder, op_name=op_name, kernel_name=kernel,
                     glue=substitute_glue(_read(folder / PYBIND), op_name, kernel),
                     module=_read(folder / MODULE),
                     question_host=_read(folder / "question" / "op_host" / f"{kernel}.cpp"),
                     question_kernel=_read(folder / "question" / "op_kernel" / f"{kernel}.cpp"))
