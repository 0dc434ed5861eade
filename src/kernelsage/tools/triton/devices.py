"""The triton backend's devices: `interpret` (the CPU, through TRITON_INTERPRET=1: correctness only), `cuda`
(NVIDIA GPUs, upstream triton and a CUDA build of torch), `npu` (Ascend NPUs, triton-ascend and torch_npu
on a host with CANN) and `npu-frontend` (triton-ascend's compiler without CANN or an NPU, in an interpreter of
its own: compile feedback only, nothing runs; ascend_frontend.py). Which one a backend uses, whether it is usable here and why not, and what the runner's
sandbox needs to reach it. torch_npu is never imported in this process (it fails, or exits the process,
without CANN): its probe runs in a child.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass

from kernelsage.errors import BackendError

DEVICES = ("interpret", "cuda", "npu", "npu-frontend")
COMPILE_ONLY = ("npu-frontend",)  # devices that compile and cannot run
DEVICE_ENV = "KERNELSAGE_TRITON_DEVICE"
CUDA_NODES = ("/dev/nvidia*",)
NPU_NODES = ("/dev/davinci*", "/dev/devmm_svm", "/dev/hisi_hdc")
NPU_DIRS = ("/usr/local/Ascend", "/usr/local/dcmi")  # the driver's libraries and tools (see docs/ascend.md)
PASSED_ENV_PREFIXES = ("ASCEND_", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class DeviceStatus:
    device: str
    usable: bool
    detail: str  # what was found, or why the device cannot be used here and what to do


def choose_device(device: str | None = None) -> str:
    """The device asked for (argument, else KERNELSAGE_TRITON_DEVICE), else cuda where torch sees a GPU, else
    interpret. An unknown name is refused."""
    name = (device or os.environ.get(DEVICE_ENV, "")).strip().lower()
    if not name:
        return "cuda" if _torch_sees_cuda() else "interpret"
    if name not in DEVICES:
        raise BackendError(f"unknown triton device {name!r}: choose one of {', '.join(DEVICES)} "
                           f"(--device or {DEVICE_ENV})")
    return name


def _torch_sees_cuda() -> bool:
    import torch

    return bool(torch.version.cuda) and torch.cuda.is_available()


def triton_version() -> str:
    """The installed triton's version, or '' when it is not installed."""
    if importlib.util.find_spec("triton") is None:
        return ""
    from importlib.metadata import PackageNotFoundError, version

    for name in ("triton", "triton-ascend"):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "unknown version"


def device_status(device: str) -> DeviceStatus:
    """Whether `device` can run (on npu-frontend: compile) Triton kernels here, with the reason and the fix
    when it cannot."""
    if device == "npu-frontend":
        from kernelsage.tools.isolation import detect
        from kernelsage.tools.triton.ascend_frontend import frontend_status

        return DeviceStatus(device, *frontend_status(detect()))
    found = triton_version()
    if not found:
        return DeviceStatus(device, False, "triton is not installed: pip install -e '.[triton]' (docs/triton.md)")
    if device == "interpret":
        return DeviceStatus(device, True, f"triton {found}, TRITON_INTERPRET=1 on the CPU: correctness only, "
                                          "kernels are not timed and earn no speed credit")
    if device == "cuda":
        import torch

        if not torch.version.cuda:
            return DeviceStatus(device, False, f"torch {torch.__version__} is a CPU build: install a CUDA build of "
                                               "torch (docs/triton.md, 'On a GPU host')")
        if not torch.cuda.is_available():
            return DeviceStatus(device, False, "torch sees no CUDA GPU (driver, CUDA_VISIBLE_DEVICES)")
        return DeviceStatus(device, True, f"triton {found}, {torch.cuda.get_device_name(0)} "
                                          f"(CUDA {torch.version.cuda})")
    return _npu_status(found)


def _npu_status(found: str) -> DeviceStatus:
    if importlib.util.find_spec("torch_npu") is None:  # no child (seconds of importing torch) to learn that
        return DeviceStatus("npu", False, "torch_npu is not installed: install CANN, torch_npu and triton-ascend "
                                          "(docs/triton.md, 'On an Ascend host')")
    probe = subprocess.run(
        [sys.executable, "-c", "import torch, torch_npu; print(torch.npu.is_available(), torch.npu.device_count())"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[-1][:200]
        return DeviceStatus("npu", False, f"torch_npu does not import ({last}): install CANN, torch_npu and "
                                          "triton-ascend (docs/triton.md, 'On an Ascend host')")
    available, count = [*probe.stdout.split(), "False", "0"][:2]
    if available != "True":
        return DeviceStatus("npu", False, "torch_npu sees no NPU (driver, ASCEND_RT_VISIBLE_DEVICES)")
    return DeviceStatus("npu", True, f"triton {found}, {count} NPU(s) through torch_npu (unverified by kernelsage's "
                                     "own tests: docs/triton.md)")


def sandbox_env(device: str, threads: int) -> dict[str, str]:
    """The runner's whole environment (bubblewrap starts it with nothing else)."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp",
           "TRITON_CACHE_DIR": "/tmp/triton-cache", "OMP_NUM_THREADS": str(threads), "PYTHONDONTWRITEBYTECODE": "1"}
    if device == "interpret":
        env["TRITON_INTERPRET"] = "1"
    else:  # the driver's libraries and the visible devices, as the host set them
        env.update({k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV_PREFIXES)})
    return env


def sandbox_device_args(device: str) -> list[str]:
    """bubblewrap options that show the runner its accelerator: device nodes, and on npu the driver's tree."""
    patterns = CUDA_NODES if device == "cuda" else NPU_NODES if device == "npu" else ()
    args: list[str] = []
    for pattern in patterns:
        for node in sorted(glob.glob(pattern)):
            args += ["--dev-bind", node, node]
    if device == "npu":
        for folder in NPU_DIRS:
            if os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]
    return args


FILTER_PROBE = ("import socket, sys\nsys.path.insert(0, sys.argv[1])\nfrom syscall_filter import install\n"
                "install('interpret')\ntry:\n    socket.socket().close()\n    print('open')\n"
                "except PermissionError:\n    print('refused')\n")


def syscall_filter_status() -> tuple[bool, str]:
    """Whether the runner's seccomp filter (sandbox/syscall_filter.py) can be installed here: a child installs
    it (interpret's policy) and then finds socket() refused. Without it the runner runs no candidate."""
    from importlib import resources

    with resources.as_file(resources.files("kernelsage.tools.triton.sandbox")) as folder:
        try:
            probe = subprocess.run([sys.executable, "-I", "-c", FILTER_PROBE, str(folder)], capture_output=True,
                                   text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"the probe did not run: {exc}"
    if probe.returncode == 0 and probe.stdout.strip() == "refused":
        return True, "installs here (a test process found socket() refused with EPERM)"
    last = (probe.stderr.strip().splitlines() or [probe.stdout.strip() or f"exit code {probe.returncode}"])[-1]
    return False, f"cannot be installed here, so the runner starts no candidate: {last[:200]}"
