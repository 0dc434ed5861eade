"""Stand-ins for the modules NPUKernelBench task files import, so they load and run on a CPU-only machine.

- `torch_npu` (imported at top level by every reference; the real package cannot be imported without the
  Ascend toolkit): device set-up calls become no-ops; any other use (an NPU-only operator) raises an error
  that says why, so a reference that needs the NPU fails clearly instead of computing wrong.
- `kernel_gen_ops`, the compiled module of the candidate's op that the suite's `ModelNew` imports: kernelsage
  never runs `ModelNew` (candidates go through its backend), so any use of it raises.
- `framework.utils`, the suite's own helpers, of which task files use `check_precision` inside their
  `custom_check_precision`: served by kernelsage's implementation of the same rule (`tasks.precision`).

Each stand-in is placed in `sys.modules` only while such a file is executed, and only when no module of
that name is loaded already (a real `torch_npu`, or the suite's own `framework` on `sys.path`).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kernelsage.tasks.npu_unavailable import NpuUnavailable

# Calls that only configure the device; harmless to skip when references run on the CPU.
NO_OP_CALLS = frozenset({
    "set_device", "synchronize", "set_compile_mode", "set_option", "manual_seed", "manual_seed_all",
    "empty_cache", "init", "set_per_process_memory_fraction",
})


class _Attribute:
    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> _Attribute:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(self)(f"{self._path}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._path.rsplit(".", 1)[-1] in NO_OP_CALLS:
            return None
        if self._path.endswith("is_available"):
            return False
        raise NpuUnavailable(f"{self._path} is not available: kernelsage runs NPU references on the CPU "
                             "(torch_npu is a stand-in here)")


class _CandidateOps(_Attribute):
    """`kernel_gen_ops`: what the suite's ModelNew calls; never available to a reference."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NpuUnavailable(f"{self._path} is the candidate's compiled op module: kernelsage evaluates "
                             "candidates through its backend, never through the suite's ModelNew")


class _StandinModule(types.ModuleType):
    def __init__(self, name: str, attribute: type[_Attribute] = _Attribute) -> None:
        super().__init__(name, __doc__)
        self.__dict__["__kernelsage_standin__"] = True
        self.__dict__["_attribute"] = attribute

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._attribute(f"{self.__name__}.{name}")


def _framework_utils() -> types.ModuleType:
    from kernelsage.tasks.precision import check_precision

    utils = types.ModuleType("framework.utils", "kernelsage's stand-in for NPUKernelBench's framework helpers")
    utils.check_precision = check_precision  # type: ignore[attr-defined]
    return utils


def standin_packages() -> dict[str, dict[str, types.ModuleType]]:
    """The stand-in modules, grouped by the top-level package they stand in for."""
    framework = types.ModuleType("framework")
    utils = _framework_utils()
    framework.utils = utils  # type: ignore[attr-defined]
    return {
        "torch_npu": {name: _StandinModule(name) for name in ("torch_npu", "torch_npu.contrib", "torch_npu.npu")},
        "kernel_gen_ops": {"kernel_gen_ops": _StandinModule("kernel_gen_ops", _CandidateOps)},
        "framework": {"framework": framework, "framework.utils": utils},
    }


@contextmanager
def torch_npu_standin() -> Iterator[None]:
    """Provide the stand-ins (torch_npu, kernel_gen_ops, framework.utils) for the duration of the block,
    each package only where no real one of that name is loaded."""
    added = {name: module for top, modules in standin_packages().items() if top not in sys.modules
             for name, module in modules.items()}
    sys.modules.update(added)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)
