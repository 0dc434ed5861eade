"""`kernelsage doctor --backend ascend` lists what a build would use (CANN, layout, paths, libraries, SoC)
before any kernel runs, on the STAND-IN ascendc install; and says in one line what is missing elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.tools.ascend.standin_cann import environ_for

REPO = Path(__file__).resolve().parents[3]


def _doctor(environ: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "KERNELSAGE_ASCEND"))}
    return subprocess.run([sys.executable, "-m", "kernelsage", "doctor", *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=REPO, env={**base, **environ})


def test_doctor_lists_the_build_inputs_of_the_probed_layout(ascendc_home: Path) -> None:
    environ = environ_for(ascendc_home)
    done = _doctor({**environ, "PATH": f"{environ['PATH']}:{os.environ['PATH']}",
                    "KERNELSAGE_ASCEND_SOC": "Ascend910B2"}, "--backend", "ascend", "--json")
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    assert checks["ascend CANN"]["detail"] == f"9.0.0.standin at {ascendc_home}"
    assert checks["ascend layout"]["detail"].startswith("ascendc (CANN 8.1 - 9.x): kernel_operator.h at "
                                                        f"{ascendc_home}/compiler/ascendc/include/basic_api")
    assert f"{ascendc_home}/compiler/ascendc/impl/aicore/basic_api" in checks["ascend include dirs"]["detail"]
    assert "-lascendc_runtime" in checks["ascend libraries"]["detail"].split()
    assert checks["ascend SoC"]["detail"] == "Ascend910B2 (--npu-arch=dav-2201), from KERNELSAGE_ASCEND_SOC"
    assert checks["ascend msopgen"]["status"] == "warn"  # the stand-in install keeps msopgen in no known place
    # only what the ascend backend needs: no database, embeddings or model checks
    assert not {"memory database", "embeddings", "chat model"} & set(checks)
    # torch_npu is not installed here: a failing item, so the command fails
    assert checks["ascend torch_npu headers"]["status"] == "fail" and done.returncode == 1


def test_doctor_without_cann_names_the_fix_and_rejects_unknown_backends() -> None:
    done = _doctor({}, "--backend", "ascend", "--json")
    checks = {c["name"]: c for c in json.loads(done.stdout)}
    assert checks["ascend CANN"]["status"] == "fail" and "ASCEND_HOME_PATH is not set" in checks["ascend CANN"]["detail"]
    assert done.returncode == 1
    wrong = _doctor({}, "--backend", "tpu")
    assert wrong.returncode != 0 and "unknown backend 'tpu'" in wrong.stderr and "Traceback" not in wrong.stderr
