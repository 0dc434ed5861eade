"""The direct route on the second STAND-IN layout (compiler/ascendc, standin_cann.py), where the stand-in
bisheng preprocesses and links with the machine's real compiler against stand-in CANN libraries built by
gcc: the derived include set resolves kernel_operator.h, the module loads with every symbol bound, and a link
set without the runtime libraries fails the build (as the previous one would have failed only at import)."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.tools.ascend.standin_cann import environ_for
from tests.tools.ascend.test_ascend_builds import DIRECT_KERNEL

from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.commands import DIRECT_GLUE_OBJECT, direct_plan
from kernelsage.tools.ascend.glue import HEADER, MODULE_FILE, HostHeaders
from kernelsage.tools.ascend.toolchain import Toolchain, detect_toolchain
from kernelsage.tools.isolation import detect
from kernelsage.tools.results import Candidate, Status

PREVIOUS_LIBS = ("ascendcl", "tiling_api", "platform")  # the direct route's link set before the layout probe


def _with(toolchain: Toolchain, **changes: object) -> Toolchain:
    assert toolchain.layout is not None
    return dataclasses.replace(toolchain, layout=dataclasses.replace(toolchain.layout, **changes))


def _load(module: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(module), mode=os.RTLD_NOW | os.RTLD_LOCAL)  # every symbol bound now, as an import does


def test_the_ascendc_layout_builds_a_module_whose_launch_stubs_are_bound(ascendc_backend: AscendBackend) -> None:
    result = ascendc_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": DIRECT_KERNEL}))
    assert result.ok and result.artifact is not None, result.log
    assert "CANN 9.0.0.standin" in result.log.splitlines()[0]
    module = Path(result.artifact.path) / MODULE_FILE
    needed = subprocess.run(["readelf", "-d", str(module)], capture_output=True, text=True, check=True).stdout
    assert "libruntime.so" in needed and "libunified_dlog.so" in needed
    launch = _load(module).ks_launch  # the stub registers through libascendc_runtime.a, then launches
    assert launch(None, 0, None, 0, None, 0, None) == 0


@pytest.fixture()
def previous_link_backend(tmp_path: Path, ascendc_home: Path, fake_headers: HostHeaders) -> Iterator[AscendBackend]:
    toolchain = _with(detect_toolchain(environ_for(ascendc_home)), libraries=PREVIOUS_LIBS)
    backend = AscendBackend(devices=[0], soc="Ascend910B3", toolchain=toolchain, headers=fake_headers,
                            cache_dir=tmp_path / "builds", build_workers=1, unsafe_no_isolation=not detect().available)
    yield backend
    backend.close()


def test_without_the_runtime_libraries_the_build_fails_naming_the_symbol(previous_link_backend: AscendBackend) -> None:
    result = previous_link_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": DIRECT_KERNEL}))
    assert result.status is Status.COMPILE_ERROR and result.artifact is None
    assert "$ runtime-check" in result.log and "$ link" not in result.log
    messages = [e.message for e in result.errors if e.severity == "error"]
    assert any("undefined reference to `rtKernelLaunchWithHandleV2'" in m for m in messages), messages


def _run_plan(toolchain: Toolchain, workdir: Path, skip: tuple[str, ...] = ()) -> dict[str, subprocess.CompletedProcess]:
    """The direct plan's command lines run as they are, outside the backend, in a fresh build directory."""
    (workdir / "kernel.cpp").write_text(DIRECT_KERNEL)
    shutil.copyfile(HEADER, workdir / HEADER.name)
    (workdir / DIRECT_GLUE_OBJECT).write_text("glue (not at hand here)\n")
    headers = HostHeaders(torch_includes=(), torch_lib=str(workdir / "no-torch"), torch_npu_root=str(workdir),
                          python_include="", cxx11_abi=1)
    done = {}
    for step in direct_plan(toolchain, "dav-2201", headers):
        if step.name in skip:
            continue
        done[step.name] = subprocess.run(step.argv, cwd=workdir, capture_output=True, text=True,
                                         env={**os.environ, **toolchain.environment}, timeout=120)
        if done[step.name].returncode:
            break
    return done


def test_the_previous_link_set_failed_only_at_import(tmp_path: Path, ascendc_home: Path) -> None:
    """Why the check exists: linked the previous way, the module builds and then cannot be loaded."""
    toolchain = _with(detect_toolchain(environ_for(ascendc_home)), libraries=PREVIOUS_LIBS)
    done = _run_plan(toolchain, tmp_path, skip=("runtime-check",))
    assert done["link"].returncode == 0, done["link"].stderr
    with pytest.raises(OSError, match=r"undefined symbol: (rtKernelLaunchWithHandleV2|AscendcRegisterKernel)"):
        _load(tmp_path / MODULE_FILE)


def test_the_previous_include_set_does_not_find_kernel_operator_h_in_the_ascendc_layout(
        tmp_path: Path, ascendc_home: Path) -> None:
    home = ascendc_home
    tik = home / "compiler" / "tikcpp"
    previous = tuple(map(str, (home / "include", tik, tik / "tikcfw", tik / "tikcfw" / "impl", tik / "tikcfw" / "interface")))
    done = _run_plan(_with(detect_toolchain(environ_for(home)), includes=previous), tmp_path)
    assert done["kernel"].returncode != 0 and "kernel_operator.h: No such file or directory" in done["kernel"].stderr
    # each directory of the derived set is needed: without highlevel_api/tiling the header's own include fails
    derived = detect_toolchain(environ_for(home)).layout
    assert derived is not None
    fewer = tuple(p for p in derived.includes if not p.endswith("highlevel_api/tiling"))
    done = _run_plan(_with(detect_toolchain(environ_for(home)), includes=fewer), tmp_path)
    assert "kernel_tiling_platform.h: No such file or directory" in done["kernel"].stderr
