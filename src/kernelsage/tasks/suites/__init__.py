"""Task suites shipped with kernelsage."""

from __future__ import annotations

from pathlib import Path

BUILTIN_SUITE = Path(__file__).parent / "builtin"
