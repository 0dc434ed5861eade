"""How each backend's kernels declare tunables and how a configuration is applied to a candidate's files."""

from __future__ import annotations

from collections.abc import Callable

from kernelsage.tuning.ascend_tunables import apply_ascend_config, ascend_space
from kernelsage.tuning.cpu_tunables import apply_cpu_config, cpu_space
from kernelsage.tuning.space import Config, TuningError, TuningSpace
from kernelsage.tuning.triton_tunables import apply_triton_config, triton_space

SpaceReader = Callable[[dict[str, str]], TuningSpace]
Applier = Callable[[dict[str, str], Config], dict[str, str]]

DIALECTS: dict[str, tuple[SpaceReader, Applier]] = {
    "cpu": (cpu_space, apply_cpu_config),
    "triton": (triton_space, apply_triton_config),
    "ascend": (ascend_space, apply_ascend_config),
}


def dialect_for(backend: str) -> tuple[SpaceReader, Applier]:
    """The declaration reader and the applier of a backend's kernels."""
    try:
        return DIALECTS[backend]
    except KeyError:
        raise TuningError(f"tuning is not available for the {backend} backend (only for "
                          f"{', '.join(DIALECTS)}: docs/tuning.md)") from None
