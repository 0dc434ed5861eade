"""Where the Ascend toolchain is missing (this machine): every entry point says which part is missing and
how to fix it, in one line, and importing the backend never imports torch_npu."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.cli.doctor import check_ascend
from kernelsage.errors import BackendError
from kernelsage.tools import ascend as ascend_package
from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.glue import host_headers
from kernelsage.tools.ascend.toolchain import ToolchainProblem, detect_toolchain
from kernelsage.tools.backend import backend_names, get_backend

REPO = Path(__file__).resolve().parents[3]
# These tests describe a machine without CANN; on an Ascend host the backend is available instead.
pytestmark = pytest.mark.skipif(bool(os.environ.get("ASCEND_HOME_PATH")),
                                reason="CANN is set up here (ASCEND_HOME_PATH): the unavailable path does not apply")


def test_without_cann_the_backend_names_the_variable_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    assert "ascend" in backend_names()
    with pytest.raises(BackendError, match=r"ASCEND_HOME_PATH is not set: .*set_env\.sh") as error:
        get_backend("ascend")
    assert "\n" not in str(error.value)


def test_each_missing_part_has_its_own_message(tmp_path: Path, standin_environ: dict[str, str],
                                               standin_toolchain, fake_headers) -> None:
    with pytest.raises(ToolchainProblem, match="is not a directory"):
        detect_toolchain({"ASCEND_HOME_PATH": str(tmp_path / "nowhere")})
    with pytest.raises(ToolchainProblem, match="no bisheng compiler"):
        detect_toolchain({"ASCEND_HOME_PATH": str(tmp_path), "PATH": "/nonexistent"})
    with pytest.raises(ToolchainProblem, match=r"torch_npu is not installed.*pip install -e '\.\[npu\]'"):
        host_headers("")
    with pytest.raises(ToolchainProblem, match="found no NPU: npu-smi is not on PATH"):
        AscendBackend(toolchain=standin_toolchain, headers=fake_headers, environ=standin_environ)


def test_importing_the_backend_never_imports_torch_npu() -> None:
    # torch_npu is not installed here: any module of the backend that imported it would fail to import.
    for module in pkgutil.iter_modules(ascend_package.__path__):
        importlib.import_module(f"kernelsage.tools.ascend.{module.name}")
    backend_names()
    assert "torch_npu" not in sys.modules


def test_the_cli_fails_with_one_line_and_doctor_lists_the_reasons(tmp_path: Path) -> None:
    source = tmp_path / "kernel.cpp"
    source.write_text("int x;\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_")}
    completed = subprocess.run([sys.executable, "-m", "kernelsage", "check", "-t", "l1_relu", "-b", "ascend",
                                "--source", str(source)], capture_output=True, text=True, timeout=300,
                               check=False, cwd=REPO, env=env)
    assert completed.returncode != 0 and "Traceback" not in completed.stderr
    assert [line for line in (completed.stdout + completed.stderr).splitlines() if line.strip()] == [
        "error: the ascend backend needs the CANN toolkit, but ASCEND_HOME_PATH is not set: install the CANN "
        "toolkit and run `source <install dir>/ascend-toolkit/set_env.sh` (default "
        "/usr/local/Ascend/ascend-toolkit/set_env.sh) in the shell that starts kernelsage"]
    check = check_ascend()
    assert check.status == "warn" and check.detail.startswith("unavailable (optional): CANN: ")
    assert "torch_npu: not installed" in check.detail and "devices: npu-smi is not on PATH" in check.detail
    assert "set_env.sh" in check.fix and "pip install -e '.[npu]'" in check.fix and "docs/ascend.md" in check.fix
