"""What the isolation of Ascend work adds to the shared bubblewrap sandbox (`kernelsage.tools.isolation`).

Compilers and the candidate's device run see, read-only, the CANN installation, the driver's libraries and
the Python environment (torch, torch_npu, kernelsage; where it lies under a home the sandbox's user cannot
enter, as a mirror: `python_mirror`); the candidate's run additionally gets the NPU device
nodes it needs (its /dev/davinci<N>, davinci_manager, devmm_svm, hisi_hdc) and nothing else of /dev. As
root, the sandbox runs as uid 65534 with the device nodes' group added, so it may open them and nothing
more.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kernelsage.tools.isolation import Isolation, popen_options, reachable_by_others

ASCEND_ROOTS = ("/usr/local/Ascend",)
DRIVER_FILES = ("/etc/ascend_install.info",)  # where the runtime finds the driver's install directory
SYSTEM_PREFIXES = ("/usr", "/bin", "/lib", "/lib64", "/sbin")


def _outermost(paths: Iterable[str]) -> list[str]:
    """The paths that exist, without those inside another one of them or inside the system directories."""
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}, key=len):
        if any(path == k or path.startswith(k.rstrip("/") + "/") for k in (*kept, *SYSTEM_PREFIXES)):
            continue
        kept.append(path)
    return kept


def cann_root(ascend_home: Path) -> str:
    """The installation root that holds the toolkit (and, usually, the driver): /usr/local/Ascend for
    /usr/local/Ascend/ascend-toolkit/latest and for CANN 8.5's /usr/local/Ascend/cann-<version>."""
    real = Path(os.path.realpath(ascend_home))
    for parent in (real, *real.parents):
        if (parent.name in ("ascend-toolkit", "cann") or parent.name.startswith("cann-")) and parent.parent != parent:
            return str(parent.parent)
    return str(real)


def python_paths() -> list[str]:
    """The Python installation and environment a device run imports torch, torch_npu and kernelsage from."""
    return _outermost([sys.base_prefix, sys.prefix, *(p for p in sys.path if p and os.path.isdir(p))])


def read_only_paths(ascend_home: Path, extra: Sequence[str] = (), *, other_user: bool = False) -> list[str]:
    """What the isolated tools and runs may read besides the system directories (with `other_user`, only
    what the sandbox's own uid can reach: bubblewrap refuses to bind the rest)."""
    paths = _outermost([cann_root(ascend_home), *ASCEND_ROOTS, *python_paths(), *extra,
                        *(f for f in DRIVER_FILES if os.path.isfile(f))])
    return [p for p in paths if reachable_by_others(p)] if other_user else paths


def with_device_nodes(command: list[str], isolation: Isolation, nodes: Sequence[str]) -> list[str]:
    """A sandboxed command line that additionally binds these device nodes (bubblewrap's --dev-bind, so
    they stay usable under the sandbox's own minimal /dev); unchanged without isolation."""
    if not isolation.available or not nodes:
        return command
    try:
        at = command.index("--chdir", command.index(isolation.bwrap))
    except ValueError:
        raise ValueError("not a bubblewrap command line: no --chdir after the bwrap executable") from None
    binds = [arg for node in nodes for arg in ("--dev-bind", node, node)]
    return [*command[:at], *binds, *command[at:]]


def device_popen_options(isolation: Isolation, nodes: Sequence[str]) -> dict[str, Any]:
    """`popen_options`, plus the device nodes' groups when the sandbox runs as another user."""
    options = popen_options(isolation)
    if options.get("user") is not None:
        groups = sorted({os.stat(node).st_gid for node in nodes if os.path.exists(node)})
        options["extra_groups"] = groups
    return options
