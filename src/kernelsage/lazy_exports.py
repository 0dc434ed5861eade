"""A package's public names imported on first use (PEP 562), so importing the package, or one of its light
modules, loads none of its heavy ones (torch, LangGraph, the model stack, the database driver)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str],
                 names: Sequence[str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's `__getattr__` and `__dir__`: `where` maps each public name to the submodule defining it;
    `names` is the package's `__all__`. A name is imported at its first look-up and kept in the package."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        vars(sys.modules[package])[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
