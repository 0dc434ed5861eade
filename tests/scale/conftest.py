"""Ray tests need the `ray` extra; without it they are skipped with the reason, never silently."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is not installed: pip install 'kernelsage[ray]' (scripts/install.sh does)")


@pytest.fixture
def no_ray_path(tmp_path: Path) -> str:
    """A PYTHONPATH whose `ray` fails to import: a command that imports Ray under it fails loudly."""
    fake = tmp_path / "poisoned" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('ray is poisoned in this test')\n")
    return str(fake.parent)
