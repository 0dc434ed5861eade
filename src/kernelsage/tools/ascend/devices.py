"""The NPUs of this host: which exist (npu-smi), what SoC they are, and a pool that lends one at a time.

Each device runs one candidate at a time (timings on a shared device would measure the neighbour); with
several NPUs, verify and profile jobs run side by side, one per device.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from kernelsage.tools.ascend.toolchain import ToolchainProblem

# `npu-smi info`: the first row of each NPU reads "| <id>  <name> | <health> | ...".
NPU_ROW = re.compile(r"^\|\s*(?P<id>\d+)\s+(?P<name>[0-9A-Za-z_\-]+)\s*\|\s*(?P<health>[A-Za-z]+)\s*\|", re.MULTILINE)
# The architecture bisheng compiles for (--npu-arch), by SoC family (the CANN Ascend C programming guide lists
# the pairs: Atlas A2/A3 training and inference series are dav-2201, Atlas inference 300I series dav-2002).
ARCH_BY_FAMILY: tuple[tuple[str, str], ...] = (
    ("Ascend910B", "dav-2201"), ("Ascend910_93", "dav-2201"), ("Ascend910C", "dav-2201"),
    ("Ascend310P", "dav-2002"), ("Ascend310B", "dav-3002"), ("Ascend910", "dav-1001"),
)
# On-chip memory per core in bytes (UB, L1, L0A, L0B, L0C), from the CANN Ascend C programming guide's
# hardware descriptions; the harness passes them to ks_launch because the ACL runtime does not report them.
MEMORY_BY_FAMILY: tuple[tuple[str, tuple[int, int, int, int, int]], ...] = (
    ("Ascend910B", (192 << 10, 512 << 10, 64 << 10, 64 << 10, 128 << 10)),
    ("Ascend910_93", (192 << 10, 512 << 10, 64 << 10, 64 << 10, 128 << 10)),
    ("Ascend910C", (192 << 10, 512 << 10, 64 << 10, 64 << 10, 128 << 10)),
    ("Ascend310P", (256 << 10, 1 << 20, 64 << 10, 64 << 10, 256 << 10)),
    ("Ascend910", (256 << 10, 1 << 20, 64 << 10, 64 << 10, 256 << 10)),
)
DEFAULT_SOC = "Ascend910B3"
SOC_ENV = "KERNELSAGE_ASCEND_SOC"
DEVICES_ENV = "KERNELSAGE_ASCEND_DEVICES"
# Device nodes the NPU driver needs besides /dev/davinci<N>: the manager, shared virtual memory, host-device
# channel (the driver's documentation for containers lists these same nodes).
SHARED_DEVICE_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")


@dataclass(frozen=True)
class Npu:
    index: int
    name: str  # as npu-smi prints it, e.g. 910B3
    health: str

    @property
    def soc(self) -> str:
        return soc_version(self.name)


def soc_version(name: str) -> str:
    """The CANN SoC version of an npu-smi chip name ('910B3' -> 'Ascend910B3')."""
    return name if name.startswith("Ascend") else f"Ascend{name}"


def npu_arch(soc: str) -> str:
    """bisheng's --npu-arch for a SoC version; raises ToolchainProblem for an unknown family."""
    for family, arch in ARCH_BY_FAMILY:
        if soc.startswith(family):
            return arch
    raise ToolchainProblem(f"unknown Ascend SoC {soc!r}: set {SOC_ENV} to one of the Ascend910B*, Ascend910_93, "
                           "Ascend310P* versions (as `npu-smi info` names the chip)")


def core_memory(soc: str) -> tuple[int, int, int, int, int]:
    """UB, L1, L0A, L0B and L0C bytes per core of a SoC (the 910B figures for an unknown one)."""
    return next((sizes for family, sizes in MEMORY_BY_FAMILY if soc.startswith(family)), MEMORY_BY_FAMILY[0][1])


def parse_npu_smi(text: str) -> list[Npu]:
    """The NPUs listed by `npu-smi info` (one per first row of a device block)."""
    return [Npu(int(m["id"]), m["name"], m["health"]) for m in NPU_ROW.finditer(text)
            if not m["name"].startswith("0000:")]


def list_npus(environ: Mapping[str, str] | None = None) -> tuple[list[Npu], str]:
    """The NPUs npu-smi reports, and '' or why none could be listed."""
    environ = os.environ if environ is None else environ
    smi = shutil.which("npu-smi", path=environ.get("PATH", "")) or shutil.which("npu-smi")
    if not smi:
        return [], "npu-smi is not on PATH (the Ascend driver is not installed, or its tools are not on PATH)"
    try:
        completed = subprocess.run([smi, "info"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"npu-smi info failed: {exc}"
    npus = parse_npu_smi(completed.stdout)
    if completed.returncode != 0 or not npus:
        detail = (completed.stderr or completed.stdout).strip().splitlines()
        return [], f"npu-smi info lists no NPU (exit code {completed.returncode}: {detail[-1] if detail else ''})"
    return npus, ""


def device_nodes(indices: Sequence[int], exists: bool = True) -> list[str]:
    """The device nodes a run on these NPUs needs (only those present, unless `exists` is False)."""
    nodes = [f"/dev/davinci{index}" for index in indices] + list(SHARED_DEVICE_NODES)
    return [node for node in nodes if not exists or os.path.exists(node)]


def selected_devices(environ: Mapping[str, str], found: Sequence[Npu]) -> list[int]:
    """The NPUs to use: KERNELSAGE_ASCEND_DEVICES (comma-separated ids) if set, else every healthy one."""
    chosen = environ.get(DEVICES_ENV, "").strip()
    if chosen:
        try:
            return [int(part) for part in chosen.split(",") if part.strip()]
        except ValueError:
            raise ToolchainProblem(f"{DEVICES_ENV}={chosen!r} is not a comma-separated list of NPU ids") from None
    return [npu.index for npu in found if npu.health.upper() in ("OK", "WARNING")]


class DevicePool:
    """Lends each device to one job at a time; a job waits for the next free device."""

    def __init__(self, devices: Sequence[int]) -> None:
        if not devices:
            raise ToolchainProblem("the device pool is empty: no usable NPU was found or selected")
        self.devices = tuple(devices)
        self._free: queue.Queue[int] = queue.Queue()
        for device in self.devices:
            self._free.put(device)

    @contextlib.contextmanager
    def lease(self, timeout: float | None = None) -> Iterator[int]:
        """One device for the duration of the block."""
        try:
            device = self._free.get(timeout=timeout)
        except queue.Empty:
            raise ToolchainProblem(f"no NPU of {list(self.devices)} became free within {timeout} s") from None
        try:
            yield device
        finally:
            self._free.put(device)
