"""The package's public names: all importable, none of them loading a model library eagerly."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kernelsage.memory_backend as memory_backend

HEAVY = ("torch", "sentence_transformers", "transformers", "psycopg", "langgraph")


def _modules_after(code: str) -> set[str]:
    """The heavy top-level modules loaded after running code in a fresh interpreter."""
    probe = f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split()) & set(HEAVY)


def test_every_public_name_resolves_to_its_home_module() -> None:
    assert sorted(memory_backend.__all__) == sorted(memory_backend._WHERE)
    for name in memory_backend.__all__:
        value = getattr(memory_backend, name)
        home = sys.modules[f"kernelsage.memory_backend.{memory_backend._WHERE[name]}"]
        assert value is getattr(home, name)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = memory_backend.Nothing


def test_the_old_store_import_path_still_works() -> None:
    from kernelsage.memory_backend import consolidation, transfer
    from kernelsage.memory_backend.store import RuleAbstractor, export_namespace, import_namespace

    assert export_namespace is transfer.export_namespace and import_namespace is transfer.import_namespace
    assert RuleAbstractor is consolidation.RuleAbstractor


def test_importing_the_package_loads_nothing_heavy() -> None:
    assert _modules_after("import kernelsage.memory_backend") == set()
    assert _modules_after("from kernelsage.memory_backend import SageParams, EpisodeTrace") == set()
    # The store needs the driver, never a model library; make_embeddings loads one on first use only.
    assert _modules_after("from kernelsage.memory_backend import MemoryStore, make_embeddings") == {"psycopg"}
