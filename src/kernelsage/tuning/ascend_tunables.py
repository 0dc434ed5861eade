"""Tunables of an Ascend kernel: the cpu dialect's `KS_TUNABLE(NAME, default, other values...)` lines
(kernelsage_tuning.h), declared where the host computes the tiling, and applied by the same generated
`ks_tuning.h` placed beside those sources. The kernel reads its tiling data unchanged between configurations.

Where the host code is, by route (`tools.ascend.candidate`): msopgen, the tiling function of
`op_host/<op>.cpp` (the header goes to `op_host/`); direct launch, `ks_launch` in `kernel.cpp` (the header goes
beside it). A kernel-only NPUKernelBench candidate has no host code of its own: the question's op_host is
built as given, so it has nothing to tune."""

from __future__ import annotations

from kernelsage.tools.ascend.candidate import (
    DIRECT,
    TUNING_HEADER,
    TUNING_MACROS_NAME,
    LayoutError,
    classify_layout,
)
from kernelsage.tuning.cpu_tunables import macro_space, parse_cpu_tunables, tuning_header
from kernelsage.tuning.space import Config, TuningError, TuningSpace

HOST = "op_host/"


def _header_name(files: dict[str, str]) -> str:
    """Where the configuration header goes among the candidate's files (its route's host sources)."""
    if not any(name.startswith(HOST) for name in files) and any(name.startswith("op_kernel/") for name in files):
        raise TuningError("a kernel-only candidate (NPUKernelBench's kernel-only mode) is built with the question's "
                          "op_host as given, so its tiling cannot be tuned: set KERNELSAGE_ASCEND_TEMPLATE_MODE=full "
                          f"and declare KS_TUNABLE in op_host (see {TUNING_MACROS_NAME})")
    try:
        layout = classify_layout({name: text for name, text in files.items() if name != HOST + TUNING_HEADER})
    except LayoutError as exc:
        raise TuningError(f"not an Ascend candidate: {exc}") from None
    return TUNING_HEADER if layout.route == DIRECT else HOST + TUNING_HEADER


def ascend_space(files: dict[str, str]) -> TuningSpace:
    """The grid of an Ascend candidate's declared tunables. An msopgen candidate declares them in op_host (a
    declaration in op_kernel is refused: the header is not beside the kernel, which reads the tiling instead)."""
    header = _header_name(files)
    if header.startswith(HOST):
        for name in sorted(n for n in files if not n.startswith(HOST)):
            found = parse_cpu_tunables(files[name], name)
            if found:
                raise TuningError(f"{name}:{found[0].line}: KS_TUNABLE belongs in op_host, where the tiling "
                                  "function sets a tiling field from it; the kernel reads that field")
        files = {name: text for name, text in files.items() if name.startswith(HOST)}
    return macro_space(files, header, TUNING_MACROS_NAME)


def apply_ascend_config(files: dict[str, str], config: Config) -> dict[str, str]:
    """The candidate's files with `ks_tuning.h` beside its host sources, setting every parameter of `config`."""
    return {**files, _header_name(files): tuning_header(config)}
