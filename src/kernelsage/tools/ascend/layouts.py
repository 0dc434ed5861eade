"""Which CANN directory layout this installation has, and the include and link sets the direct route derives
from it.

CANN moved Ascend C's headers between releases (docs/ascend.md has the table and the upstream file behind
each path): older toolkits keep `kernel_operator.h` in `compiler/tikcpp/tikcfw`, 8.1 and later in
`compiler/ascendc/include/basic_api` (a link into `<arch>-linux/ascendc`), and the open-source asc-devkit of
8.5 / 9.x installs it under `<arch>-linux/asc/include` (keeping the `compiler/ascendc` path as a link). The
layout is probed from the files present, never guessed from the version string, and only directories and
libraries that exist are passed on, so the same code serves every release we know of.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LayoutSpec:
    """One known layout: where its kernel_operator.h is and the include directories a kernel needs."""

    name: str
    versions: str
    markers: tuple[str, ...]  # any of these present: this layout
    includes: tuple[str, ...]


def _arch_dir() -> str:
    return f"{platform.machine() or 'x86_64'}-linux"


# Newest first: an installation with several (8.1 still ships tikcfw) takes the first whose header exists.
LAYOUTS = (
    LayoutSpec("ascendc", "CANN 8.1 - 9.x", ("compiler/ascendc/include/basic_api/kernel_operator.h",), (
        "include", "include/experiment/runtime", "include/experiment/msprof", "compiler/tikcpp/include",
        "compiler/ascendc/include/basic_api", "compiler/ascendc/include/basic_api/impl",
        "compiler/ascendc/include/basic_api/interface", "compiler/ascendc/include/highlevel_api/impl",
        "compiler/ascendc/include/highlevel_api/tiling", "compiler/ascendc/impl/aicore/basic_api")),
    LayoutSpec("asc", "CANN 8.5 - 9.x (asc-devkit)", (
        "compiler/asc/include/kernel_operator.h", "asc/include/kernel_operator.h",
        "{arch}/asc/include/kernel_operator.h"), (
        "include", "include/experiment/runtime", "include/experiment/msprof", "asc/include",
        "compiler/asc/include", "{arch}/asc/include", "compiler/tikcpp/include")),
    LayoutSpec("tikcpp", "CANN 7.x - 8.0", ("compiler/tikcpp/tikcfw/kernel_operator.h",), (
        "include", "compiler/tikcpp", "compiler/tikcpp/tikcfw", "compiler/tikcpp/tikcfw/impl",
        "compiler/tikcpp/tikcfw/interface")),
)
LIB_DIRS = ("lib64", "{arch}/lib64")
# What the launch stubs and the runtime registration of a `<<<...>>>` kernel need (upstream's direct-launch
# link set): without them the module links but fails on import with an undefined symbol. The static
# archives come first, so that the shared libraries after them resolve what they refer to (--as-needed).
REQUIRED_LIBS = ("ascendc_runtime", "tiling_api", "ascendcl", "runtime", "register", "platform", "profapi")
# What CANN's own ascendc_library links besides (libascendc_runtime.a refers to them); linked where present.
# ascendalog became unified_dlog in the 9.x packages.
OPTIONAL_LIBS = ("error_manager", "ge_common_base", "ascendalog", "unified_dlog", "mmpa", "ascend_dump", "c_sec")
SYSTEM_LIBS = ("m", "dl")


@dataclass(frozen=True)
class CannLayout:
    """What the direct route builds with on this installation: include and library directories, libraries."""

    name: str
    versions: str
    header: str  # the kernel_operator.h found
    includes: tuple[str, ...]
    lib_dirs: tuple[str, ...]
    libraries: tuple[str, ...]  # found ones, required first, then SYSTEM_LIBS
    missing: tuple[str, ...] = ()  # required libraries not found in any lib_dir

    def include_flags(self) -> list[str]:
        return [f"-I{path}" for path in self.includes]

    def link_flags(self) -> list[str]:
        """-L and rpath per library directory, then -l per library, in link order."""
        dirs = [flag for path in self.lib_dirs for flag in (f"-L{path}", f"-Wl,-rpath,{path}")]
        return dirs + [f"-l{name}" for name in self.libraries]


def _expand(home: Path, relative: str) -> Path:
    return home / relative.format(arch=_arch_dir())


def _library_in(dirs: list[Path], name: str) -> bool:
    return any((d / f"lib{name}.so").exists() or (d / f"lib{name}.a").exists() for d in dirs)


def probe_layout(home: Path) -> CannLayout | None:
    """The first known layout whose kernel_operator.h exists under `home`, with the directories and
    libraries found there (None when no known layout matches)."""
    for spec in LAYOUTS:
        header = next((p for p in (_expand(home, m) for m in spec.markers) if p.is_file()), None)
        if header is None:
            continue
        includes = [p for p in (_expand(home, rel) for rel in spec.includes) if p.is_dir()]
        dirs: list[Path] = []
        for candidate in (_expand(home, rel) for rel in LIB_DIRS):
            # lib64 is usually a link to <arch>-linux/lib64: one directory, named once
            if candidate.is_dir() and all(candidate.resolve() != d.resolve() for d in dirs):
                dirs.append(candidate)
        found = [n for n in (*REQUIRED_LIBS, *OPTIONAL_LIBS) if _library_in(dirs, n)]
        return CannLayout(name=spec.name, versions=spec.versions, header=str(header),
                          includes=tuple(map(str, includes)), lib_dirs=tuple(map(str, dirs)),
                          libraries=(*found, *SYSTEM_LIBS),
                          missing=tuple(n for n in REQUIRED_LIBS if n not in found))
    return None


def layout_problem(home: Path, layout: CannLayout | None) -> str:
    """Why this installation cannot build the direct route ('' when it can), in one line."""
    if layout is None:
        known = "; ".join(f"{s.markers[0]} ({s.versions})" for s in LAYOUTS)
        return f"CANN at {home} has no kernel_operator.h where known layouts keep it ({known})"
    if layout.missing:
        where = ", ".join(layout.lib_dirs) or f"{home}/lib64 (absent)"
        names = ", ".join(f"lib{n}.so" for n in layout.missing)
        return (f"CANN at {home} (layout {layout.name}) lacks {names} in {where}: the direct route's launch stubs "
                "need them at link time")
    return ""
