"""STAND-IN CANN installations for the tests, in the two layouts the backend knows (docs/ascend.md):

- `tikcpp` (CANN 7.x - 8.0): ascend-toolkit/latest with kernel_operator.h in compiler/tikcpp/tikcfw, the
  stand-in tools in bin/ and placeholder libraries (its bisheng only records and replays);
- `ascendc` (CANN 8.1 - 9.x): cann-<version> with kernel_operator.h in <arch>-linux/ascendc/include/basic_api
  (reached through the compiler/ascendc link), lib64 a link to <arch>-linux/lib64, bisheng only in
  <arch>-linux/ccec_compiler/bin and REAL: the libraries are real shared objects and archives built here with
  gcc (the runtime's launch in libruntime.so, a registration in libascendc_runtime.a that needs libruntime
  and libunified_dlog), and the stand-in bisheng preprocesses and links with the real compiler.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

STANDIN = Path(__file__).resolve().parent / "standin"
ARCH = f"{platform.machine()}-linux"
# name -> (C source, kind); every library the probe requires, plus the optional one the archive needs
LIBRARIES = {
    "runtime": ("int rtKernelLaunchWithHandleV2(void* h, unsigned b) { return 0; }\n"
                "int rtDevBinaryRegister(const char* n) { return 0; }\n", "so"),
    "unified_dlog": ("void DlogRecordStub(void) {}\n", "so"),
    "ascendc_runtime": ("extern int rtDevBinaryRegister(const char*); extern void DlogRecordStub(void);\n"
                        "int AscendcRegisterKernel(const char* n) { DlogRecordStub(); return rtDevBinaryRegister(n); }\n",
                        "a"),
    "tiling_api": ("int TilingApiStub(void) { return 0; }\n", "a"),
    **{name: (f"int {name}_stub(void) {{ return 0; }}\n", "so")
       for name in ("ascendcl", "register", "platform", "profapi")},
}
HEADERS = {  # kernel_operator.h of the ascendc layout needs every directory of the layout's include set
    "basic_api/kernel_operator.h": '#include "kernel_operator_intf.h"\n#include "kernel_operator_impl.h"\n'
                                   '#include "kernel_tiling_platform.h"\n#include "kernel_aicore.h"\n',
    "basic_api/interface/kernel_operator_intf.h": "#pragma once\n",
    "basic_api/impl/kernel_operator_impl.h": "#pragma once\n",
    "highlevel_api/tiling/kernel_tiling_platform.h": "#pragma once\n",
}


def _tools(target: Path, real: bool = False) -> None:
    shutil.copytree(STANDIN, target, ignore=shutil.ignore_patterns("__pycache__"))
    if real:
        (target / "REAL_LINK").write_text("the stand-in bisheng preprocesses and links for real\n")


def _readable(base: Path) -> None:
    """As a real install is: readable by the sandbox's unprivileged user."""
    os.chmod(base, 0o755)
    for path in base.rglob("*"):
        if not path.is_symlink():
            os.chmod(path, 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)


def tikcpp_install(base: Path) -> Path:
    """The first layout: placeholder libraries (its bisheng never links)."""
    home = base / "Ascend" / "ascend-toolkit" / "latest"
    _tools(home / "bin")
    (home / "include").mkdir()
    tikcfw = home / "compiler" / "tikcpp" / "tikcfw"
    for sub in ("impl", "interface"):
        (tikcfw / sub).mkdir(parents=True)
    (tikcfw / "kernel_operator.h").write_text("#pragma once\n")
    (home / "lib64").mkdir()
    for name, (_, kind) in LIBRARIES.items():
        (home / "lib64" / f"lib{name}.{kind}").write_text("placeholder\n")
    (home / "version.cfg").write_text("# stand-in install\nversion=8.0.RC3.standin\n")
    _readable(base)
    return home


def build_libraries(lib64: Path, omit: Sequence[str] = ()) -> None:
    """The stand-in CANN libraries, compiled and archived by the machine's gcc."""
    lib64.mkdir(parents=True, exist_ok=True)
    for name, (source, kind) in LIBRARIES.items():
        if name in omit:
            continue
        c_file, obj = lib64 / f"{name}.c", lib64 / f"{name}.o"
        c_file.write_text(source)
        subprocess.run(["gcc", "-fPIC", "-c", str(c_file), "-o", str(obj)], check=True)
        out = lib64 / f"lib{name}.{kind}"
        command = ["gcc", "-shared", str(obj), "-o", str(out)] if kind == "so" else ["ar", "rcs", str(out), str(obj)]
        subprocess.run(command, check=True)
        c_file.unlink()
        obj.unlink()


def ascendc_install(base: Path, omit: Sequence[str] = ()) -> Path:
    """The second layout, with real libraries (less those in `omit`)."""
    home = base / "Ascend" / "cann-9.0.0"
    _tools(home / ARCH / "ccec_compiler" / "bin", real=True)
    hostbin = home / "tools" / "hostbin"  # the host g++ stand-in (the glue), apart from bisheng
    hostbin.mkdir(parents=True)
    for name in ("g++", "_standin.py"):
        shutil.copy2(STANDIN / name, hostbin / name)
    ascendc = home / ARCH / "ascendc"
    for relative, text in HEADERS.items():
        path = ascendc / "include" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    aicore = ascendc / "impl" / "aicore" / "basic_api"
    aicore.mkdir(parents=True)
    (aicore / "kernel_aicore.h").write_text("#pragma once\n")
    (home / ARCH / "include").mkdir()
    (home / "compiler").mkdir()
    (home / "compiler" / "ascendc").symlink_to(Path("..") / ARCH / "ascendc")
    (home / "include").symlink_to(Path(ARCH) / "include")
    build_libraries(home / ARCH / "lib64", omit)
    (home / "lib64").symlink_to(Path(ARCH) / "lib64")
    (home / "version.cfg").write_text("# version: 1.0\nruntime_running_version=[8.0.0.1.100:9.0.0.standin]\n")
    _readable(base)
    return home


def environ_for(home: Path) -> dict[str, str]:
    """What set_env.sh would export for the install (the host-compiler stand-in first on PATH)."""
    hostbin = home / "tools" / "hostbin"
    path = hostbin if hostbin.is_dir() else home / "bin"
    return {"ASCEND_HOME_PATH": str(home), "PATH": f"{path}:/usr/bin:/bin", "ASCEND_OPP_PATH": str(home / "opp")}
