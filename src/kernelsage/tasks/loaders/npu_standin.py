"""A stand-in `torch_npu` module so NPUKernelBench reference files load and run on a CPU-only machine.

Those files `import torch_npu` at top level, and the real package cannot be imported without the Ascend
toolkit. The stand-in is placed in `sys.modules` only while such a file is executed, and only when no
`torch_npu` is loaded already. Device set-up calls become no-ops; any other use (an NPU-only operator)
raises an error that says why, so a reference that needs the NPU fails clearly instead of computing wrong.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Calls that only configure the device; harmless to skip when references run on the CPU.
NO_OP_CALLS = frozenset({
    "set_device", "synchronize", "set_compile_mode", "set_option", "manual_seed", "manual_seed_all",
    "empty_cache", "init", "set_per_process_memory_fraction",
})


class NpuUnavailable(RuntimeError):
    """An NPU-only feature was used by a reference that runs on the CPU."""


class _Attribute:
    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> _Attribute:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Attribute(f"{self._path}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._path.rsplit(".", 1)[-1] in NO_OP_CALLS:
            return None
        if self._path.endswith("is_available"):
            return False
        raise NpuUnavailable(f"{self._path} is not available: kernelsage runs NPU references on the CPU "
                             "(torch_npu is a stand-in here)")


class _StandinModule(types.ModuleType):
    def __getattr__(self, name: str) -> _Attribute:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Attribute(f"torch_npu.{name}")


def make_standin() -> types.ModuleType:
    module = _StandinModule("torch_npu", __doc__)
    module.__dict__["__kernelsage_standin__"] = True
    return module


@contextmanager
def torch_npu_standin() -> Iterator[None]:
    """Provide the stand-in as `torch_npu` (and `torch_npu.contrib`) for the duration of the block."""
    if "torch_npu" in sys.modules:
        yield
        return
    standin = make_standin()
    names = {"torch_npu": standin, "torch_npu.contrib": make_standin(), "torch_npu.npu": make_standin()}
    sys.modules.update(names)
    try:
        yield
    finally:
        for name in names:
            sys.modules.pop(name, None)
