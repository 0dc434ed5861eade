"""A candidate given on the command line: one file named as the task expects, or a directory of several files;
each wrong shape refused in one line that names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.cli.candidate_source import named_for_task, read_candidate
from kernelsage.errors import ConfigurationError

MSOPGEN = ("op_host/add_custom.cpp", "op_kernel/add_custom.cpp")


def _write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


def _refusal(source: Path, expected: tuple[str, ...]) -> str:
    with pytest.raises(ConfigurationError) as caught:
        read_candidate(source, expected, task_id="level1/AddCustom", backend="ascend")
    return str(caught.value)


def test_one_file_takes_the_name_the_task_fixes(tmp_path: Path) -> None:
    source = _write(tmp_path, {"mine.cpp": "// kernel"}) / "mine.cpp"
    assert read_candidate(source, ("op_kernel/add_custom.cpp",), task_id="t", backend="ascend") == {
        "op_kernel/add_custom.cpp": "// kernel"}
    assert read_candidate(source, ("kernel.cpp",), task_id="t", backend="cpu") == {"mine.cpp": "// kernel"}
    assert read_candidate(source, ("kernel.py",), task_id="t", backend="triton") == {"kernel.py": "// kernel"}


def test_a_directory_holds_a_candidate_of_several_files_at_their_paths(tmp_path: Path) -> None:
    _write(tmp_path, {**{name: f"// {name}" for name in MSOPGEN}, "op_host/add_custom_tiling.h": "// tiling",
                      ".git/HEAD": "ref", "op_kernel/.swp": "x"})
    files = read_candidate(tmp_path, MSOPGEN, task_id="t", backend="ascend")
    # the optional tiling header goes along for the backend's layout rules to judge; hidden files do not
    assert sorted(files) == [*MSOPGEN[:1], "op_host/add_custom_tiling.h", MSOPGEN[1]]
    # an msopgen pair for a backend whose default candidate is one file: passed on as it is
    assert sorted(read_candidate(tmp_path, ("kernel.cpp",), task_id="t", backend="ascend")) == sorted(files)


def test_each_wrong_shape_is_named(tmp_path: Path) -> None:
    one = _write(tmp_path / "one", {"add_custom.cpp": "// kernel"})
    assert "is 2 files (op_host/add_custom.cpp, op_kernel/add_custom.cpp): give --source the directory" in _refusal(
        one / "add_custom.cpp", MSOPGEN)
    half = _write(tmp_path / "half", {"op_kernel/add_custom.cpp": "// kernel"})
    assert _refusal(half, MSOPGEN) == (f"{half} lacks op_host/add_custom.cpp: a candidate for level1/AddCustom on "
                                       "ascend is op_host/add_custom.cpp, op_kernel/add_custom.cpp")
    kernels = _write(tmp_path / "kernels", {"relu.cpp": "//", "softmax.cpp": "//"})
    message = _refusal(kernels, ("kernel.cpp",))
    assert "is a directory, not a source file" in message and "eval" in message
    assert "no such source file or directory" in _refusal(tmp_path / "absent.cpp", ("kernel.cpp",))
    binary = _write(tmp_path / "binary", {"kernel.cpp": b"\xff\xfe kernel"})
    assert _refusal(binary / "kernel.cpp", ("kernel.cpp",)) == f"{binary}/kernel.cpp is not UTF-8 text (byte 0): a " \
                                                               "candidate is source code"
    crowd = _write(tmp_path / "crowd", {f"part{n}.h": "//" for n in range(65)} | {"kernel.cpp": "//"})
    assert "holds 66 files; a candidate has at most 64" in _refusal(crowd, ("kernel.cpp",))
    huge = _write(tmp_path / "huge", {"kernel.cpp": "//"})
    with (huge / "kernel.cpp").open("r+b") as sparse:  # a log given by mistake: refused before it is read
        sparse.truncate(5 << 20)
    assert _refusal(huge / "kernel.cpp", ("kernel.cpp",)) == (f"{huge}/kernel.cpp holds more than 4 MiB: a "
                                                              "candidate is the source code of one kernel")
    assert "holds more than 4 MiB" in _refusal(huge, ("kernel.cpp",))


def test_eval_names_a_one_file_kernel_as_the_task_expects() -> None:
    assert named_for_task({"kernel.cpp": "//"}, ("op_kernel/add_custom.cpp",)) == {"op_kernel/add_custom.cpp": "//"}
    assert named_for_task({"kernel.cpp": "//"}, ("kernel.cpp",)) == {"kernel.cpp": "//"}
    assert named_for_task({"kernel.py": "#"}, ("kernel.py",)) == {"kernel.py": "#"}
    pair = {name: "//" for name in MSOPGEN}
    assert named_for_task(pair, MSOPGEN) == pair
