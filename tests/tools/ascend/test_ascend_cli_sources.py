"""What `check`/`tune --source` hand the ascend backend for a NPUKernelBench task: the user's one file under the
name kernel-only mode fixes (op_kernel/<op>.cpp), built through the task's glue by the STAND-IN toolchain; in full
mode a directory of op_host + op_kernel, and one file refused in a line naming the two."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.tools.ascend.test_ascend_suite_route import FIXTURES, FOREACH, KERNEL

from kernelsage.cli.candidate_source import read_candidate
from kernelsage.errors import ConfigurationError
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.suite_build import candidate_files_for, suite_task_of
from kernelsage.tools.backend import files_to_write
from kernelsage.tools.results import Candidate


def test_one_file_reaches_the_build_under_the_kernel_only_name(standin_backend: AscendBackend,
                                                               tmp_path: Path) -> None:
    task = find_task(load_suite(FIXTURES, task_ids=[FOREACH]), FOREACH)
    (tmp_path / "my_kernel.cpp").write_text(KERNEL)
    files = read_candidate(tmp_path / "my_kernel.cpp", files_to_write(standin_backend, task), task_id=task.id,
                           backend="ascend")
    assert files == {"op_kernel/foreach_scale_list.cpp": KERNEL}
    built = standin_backend.compile(Candidate(task_id=task.id, files=files), task=task)
    assert built.ok and built.artifact is not None, built.log


def test_full_mode_takes_a_directory_and_refuses_one_file(tmp_path: Path) -> None:
    task = find_task(load_suite(FIXTURES, task_ids=[FOREACH]), FOREACH)
    full = candidate_files_for(suite_task_of(task), kernel_only=False)
    assert full == ("op_host/foreach_scale_list.cpp", "op_kernel/foreach_scale_list.cpp")
    (tmp_path / "op_host").mkdir()
    (tmp_path / "op_kernel").mkdir()
    (tmp_path / "op_kernel/foreach_scale_list.cpp").write_text(KERNEL)
    with pytest.raises(ConfigurationError, match="give --source the directory that holds them"):
        read_candidate(tmp_path / "op_kernel/foreach_scale_list.cpp", full, task_id=task.id, backend="ascend")
    with pytest.raises(ConfigurationError, match=r"lacks op_host/foreach_scale_list\.cpp"):
        read_candidate(tmp_path, full, task_id=task.id, backend="ascend")
    (tmp_path / "op_host/foreach_scale_list.cpp").write_text("// host")
    assert sorted(read_candidate(tmp_path, full, task_id=task.id, backend="ascend")) == list(full)
