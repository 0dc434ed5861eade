"""The host glue of both routes compiles (g++ -fsyntax-only) against the real torch and torch_npu headers.

torch_npu is never installed into the environment (without CANN it breaks `import torch`): its wheel is
downloaded once into ~/.cache/kernelsage (or $KERNELSAGE_CACHE) and only its include/ tree unpacked. Slow
(about a minute per glue on two cores; both run side by side); skipped when the package index is unreachable.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from kernelsage.tools.ascend.candidate import OpAttr, OpSignature
from kernelsage.tools.ascend.glue import (
    DIRECT_GLUE,
    HEADER,
    glue_compile_command,
    host_headers,
    msopgen_glue_source,
)

pytestmark = pytest.mark.slow
TORCH_VERSION = torch.__version__.split("+")[0]


def torch_npu_tree() -> Path:
    """The unpacked include/ tree of the torch-npu wheel matching this torch (downloaded once)."""
    base = Path(os.environ.get("KERNELSAGE_CACHE") or Path.home() / ".cache" / "kernelsage")
    root = base / f"torch_npu-headers-{TORCH_VERSION}"
    if (root / "torch_npu" / "include" / "acl" / "acl.h").is_file():
        return root / "torch_npu"
    wheels = base / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"torch_npu-{TORCH_VERSION}-*.whl"))
    if not found:
        completed = subprocess.run([sys.executable, "-m", "pip", "download", f"torch-npu=={TORCH_VERSION}",
                                    "--no-deps", "-d", str(wheels)], capture_output=True, text=True, timeout=600,
                                   check=False)
        found = sorted(wheels.glob(f"torch_npu-{TORCH_VERSION}-*.whl"))
        if completed.returncode != 0 or not found:
            pytest.skip(f"torch-npu=={TORCH_VERSION} could not be downloaded (package index unreachable?): "
                        f"{(completed.stderr.strip().splitlines() or ['no output'])[-1]}")
    with zipfile.ZipFile(found[-1]) as wheel:
        wheel.extractall(root, [n for n in wheel.namelist() if n.startswith("torch_npu/include/")])
    return root / "torch_npu"


def test_the_glue_of_both_routes_compiles_against_torch_npu_headers(tmp_path: Path) -> None:
    headers = host_headers(str(torch_npu_tree()))
    generated = tmp_path / "glue_op.cpp"
    generated.write_text(msopgen_glue_source(OpSignature(
        "AddRmsNorm", ("x1", "x2", "gamma"), ("y", "rstd", "x"),
        (OpAttr("epsilon", "Float"), OpAttr("axes", "ListInt"), OpAttr("keep", "Bool"), OpAttr("mode", "String"),
         OpAttr("count", "Int")))))
    checks = {name: subprocess.Popen(glue_compile_command("g++", headers, str(source), "", (str(HEADER.parent),),
                                                          syntax_only=True),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for name, source in (("direct", DIRECT_GLUE), ("msopgen", generated))}
    for name, process in checks.items():
        _, stderr = process.communicate(timeout=900)
        errors = [line for line in stderr.splitlines() if "error" in line]
        assert process.returncode == 0, f"{name} glue: {errors[:5] or stderr[-2000:]}"
