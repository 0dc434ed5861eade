"""Files written whole, by many writers at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelsage.files import write_atomically


def test_writers_of_one_path_at_once_leave_one_whole_file_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    contents = [f"{n:03d}" * 20_000 for n in range(24)]  # large enough for writes to overlap
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda text: write_atomically(target, text, mode=0o444), contents))
    assert target.read_text() in contents and oct(target.stat().st_mode & 0o777) == "0o444"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_a_failed_write_leaves_the_old_file_and_no_partial(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_atomically(target, "old")
    with pytest.raises(TypeError):
        write_atomically(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["run.json"]
