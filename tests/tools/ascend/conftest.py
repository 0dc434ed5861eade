"""Fixtures of the ascend backend tests: a STAND-IN CANN toolchain (tests/tools/ascend/standin: scripts that
play bisheng, msopgen, cmake and g++ and replay diagnostics in the real tools' formats) installed in a
temporary CANN-like directory, and an ascend backend built on it. No test here needs CANN or an NPU."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.tools.ascend.standin_cann import ascendc_install, environ_for, tikcpp_install

from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.glue import HostHeaders
from kernelsage.tools.ascend.toolchain import Toolchain, detect_toolchain
from kernelsage.tools.isolation import detect


@pytest.fixture(scope="session")
def standin_home() -> Iterator[Path]:
    """A CANN-like install of the tikcpp layout (Ascend/ascend-toolkit/latest) whose bin/ holds the stand-in
    tools, readable by the sandbox's unprivileged user (as a real install is)."""
    base = Path(tempfile.mkdtemp(prefix="kernelsage-standin-"))
    yield tikcpp_install(base)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def standin_environ(standin_home: Path) -> dict[str, str]:
    # a caller's operator path, which builds must not see and runs must not share
    return {**environ_for(standin_home), "ASCEND_CUSTOM_OPP_PATH": "/nonexistent/shared/vendors/customize"}


@pytest.fixture(scope="session")
def ascendc_home() -> Iterator[Path]:
    """A CANN-like install of the ascendc layout (cann-9.0.0) with real libraries and a real-linking bisheng."""
    base = Path(tempfile.mkdtemp(prefix="kernelsage-standin-ascendc-"))
    yield ascendc_install(base)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def ascendc_backend(tmp_path_factory: pytest.TempPathFactory, ascendc_home: Path,
                    fake_headers: HostHeaders) -> Iterator[AscendBackend]:
    backend = AscendBackend(devices=[0], soc="Ascend910B3", toolchain=detect_toolchain(environ_for(ascendc_home)),
                            headers=fake_headers, cache_dir=tmp_path_factory.mktemp("ascend-builds-ascendc"),
                            build_workers=1, unsafe_no_isolation=not detect().available)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def standin_toolchain(standin_environ: dict[str, str]) -> Toolchain:
    return detect_toolchain(standin_environ)


@pytest.fixture(scope="session")
def fake_headers(tmp_path_factory: pytest.TempPathFactory) -> HostHeaders:
    """Header locations for the stand-in tools (which read none)."""
    root = tmp_path_factory.mktemp("torch_npu")
    (root / "include").mkdir()
    return HostHeaders(torch_includes=(str(root / "torch-include"),), torch_lib=str(root / "torch-lib"),
                       torch_npu_root=str(root), python_include=str(root / "python-include"), cxx11_abi=1)


@pytest.fixture(scope="session")
def standin_backend(tmp_path_factory: pytest.TempPathFactory, standin_toolchain: Toolchain,
                    fake_headers: HostHeaders) -> Iterator[AscendBackend]:
    """An ascend backend on the stand-in toolchain (isolated by bubblewrap where it works here), two build
    workers so builds can run side by side; device 0 is named but never used."""
    backend = AscendBackend(devices=[0], soc="Ascend910B3", toolchain=standin_toolchain, headers=fake_headers,
                            cache_dir=tmp_path_factory.mktemp("ascend-builds"), build_workers=2,
                            unsafe_no_isolation=not detect().available)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def hidden_python() -> list[str]:
    """The parts of this Python the sandbox's user cannot reach (under /root: the backend mirrors them);
    skips a test that needs a device run where they cannot be mirrored, with the backend's own reason."""
    from kernelsage.tools.ascend.python_mirror import unmirrorable
    from kernelsage.tools.ascend.sandboxing import python_paths
    from kernelsage.tools.isolation import reachable_by_others

    isolation = detect()
    hidden = [p for p in python_paths() if not reachable_by_others(p)] if isolation.user is not None else []
    problem = unmirrorable(hidden)
    if problem:
        pytest.skip(problem)
    return hidden
