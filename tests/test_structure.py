"""The shape of the code base: small source files (the layers themselves are checked by `lint-imports`)."""

from __future__ import annotations

from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "kernelsage"
MAX_LINES = 400


def test_no_source_file_is_longer_than_the_limit() -> None:
    lengths = {path.relative_to(SOURCE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
               for path in SOURCE.rglob("*.py")}
    assert len(lengths) > 50  # the walk found the package
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}
