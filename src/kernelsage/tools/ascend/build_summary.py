"""What an Ascend build would use on this host, before any kernel runs: the CANN release and layout, the
include directories and libraries the direct route derives from it, the tools, the SoC and its architecture,
the torch_npu headers. Read by `kernelsage doctor --backend ascend` and `scripts/validate_ascend.sh`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kernelsage.tools.ascend.devices import DEFAULT_SOC, SOC_ENV, list_npus, npu_arch
from kernelsage.tools.ascend.glue import host_headers
from kernelsage.tools.ascend.toolchain import ToolchainProblem, detect_toolchain


@dataclass(frozen=True)
class BuildItem:
    """One thing a build uses: what it is, where it comes from, and whether it is usable (ok | warn | fail)."""

    name: str
    status: str
    detail: str


def _soc(environ: Mapping[str, str]) -> tuple[str, str]:
    if environ.get(SOC_ENV):
        return environ[SOC_ENV], SOC_ENV
    npus, problem = list_npus(environ)
    if npus:
        return npus[0].soc, f"npu-smi (NPU {npus[0].index})"
    return DEFAULT_SOC, f"the default, as no NPU is listed ({problem})"


def build_summary(environ: Mapping[str, str] | None = None) -> list[BuildItem]:
    """The direct and msopgen routes' inputs on this host, each with its status; a missing CANN is one
    failing item naming the fix (nothing here imports torch_npu or runs a kernel)."""
    environ = os.environ if environ is None else environ
    try:
        toolchain = detect_toolchain(environ)
    except ToolchainProblem as exc:
        return [BuildItem("CANN", "fail", str(exc))]
    layout = toolchain.layout
    assert layout is not None  # detect_toolchain refuses an installation without one
    items = [
        BuildItem("CANN", "ok", f"{toolchain.cann_version} at {toolchain.ascend_home}"),
        BuildItem("layout", "ok", f"{layout.name} ({layout.versions}): kernel_operator.h at {layout.header}"),
        BuildItem("include dirs", "ok", " ".join(layout.includes)),
        BuildItem("library dirs", "ok", " ".join(layout.lib_dirs)),
        BuildItem("libraries", "ok", " ".join(f"-l{name}" for name in layout.libraries)),
        BuildItem("bisheng", "ok", f"{toolchain.bisheng} ({toolchain.bisheng_version or 'no --version answer'})"),
        BuildItem("msopgen", "ok" if toolchain.msopgen else "warn",
                  toolchain.msopgen or "not found: the msopgen route (op_host/op_kernel candidates) cannot build"),
        BuildItem("host compiler", "ok", toolchain.host_cxx),
    ]
    soc, source = _soc(environ)
    try:
        items.append(BuildItem("SoC", "ok", f"{soc} (--npu-arch={npu_arch(soc)}), from {source}"))
    except ToolchainProblem as exc:
        items.append(BuildItem("SoC", "fail", str(exc)))
    try:
        headers = host_headers()
        items.append(BuildItem("torch_npu headers", "ok", f"{headers.torch_npu_root}/include (torch "
                                                          f"{headers.torch_version})"))
    except ToolchainProblem as exc:
        items.append(BuildItem("torch_npu headers", "fail", str(exc)))
    return items
