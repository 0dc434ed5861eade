"""The build plans of both routes: which tool runs with which arguments, in the candidate's build directory.

Pure functions of the toolchain, the SoC and the header locations. Every path a command names inside the
build directory is relative (the directory is /build inside the sandbox and a private directory outside),
so the same plan runs isolated or not, and builds of different candidates never share a file: they run in
parallel.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelsage.errors import BackendError
from kernelsage.tools.ascend.candidate import DIRECT_SOURCE, OpSignature
from kernelsage.tools.ascend.glue import MODULE_FILE, HostHeaders, glue_flags, torch_link_flags
from kernelsage.tools.ascend.toolchain import Toolchain

DIRECT_GLUE_OBJECT = "glue_direct.o"
OPGEN_GLUE_SOURCE = "glue_op.cpp"
OPGEN_SPEC = "op.json"
OPGEN_PROJECT = "project"
OPGEN_INSTALL = "opp"
OPGEN_ATTRS = "attributes.json"  # written by the trusted side: the OpDef's attribute names in API order
SUITE_GLUE = "suite_glue.json"  # written by the trusted side: the module was built from the task's own glue
OPGEN_VENDOR = "customize"  # msopgen's default vendor name: the installed package is opp/vendors/customize
CANDIDATE_DIR = "candidate"
# Release flags for bisheng: optimised, assertions off, position-independent (the object goes into a module).
KERNEL_FLAGS = ("-std=c++17", "-O2", "-DNDEBUG", "-fPIC")
# The direct route's kernel object must link completely against the CANN runtime (its launch stubs refer to
# libruntime and libascendc_runtime): checked by a link that allows no undefined symbol, so a missing runtime
# library fails the build instead of the import. The module's own link cannot check that (Python's symbols
# are undefined until the interpreter loads it). libstdc++ because the host part may use the standard library.
RUNTIME_CHECK = "kernel_runtime_check.so"
RUNTIME_CHECK_FLAGS = ("-Wl,--no-undefined", "-lstdc++")
# ASCEND_CUSTOM_OPP_PATH perturbs an msopgen project's build (upstream removes it before build.sh) and would
# be the install target of a package installed without --install-path: both steps run without it.
WITHOUT_CUSTOM_OPP = "unset ASCEND_CUSTOM_OPP_PATH; "
# The JSON types msopgen's operator description uses, by torch dtype and by OpDef attribute type.
JSON_DTYPES = {"float32": "float", "float16": "float16", "bfloat16": "bfloat16", "int32": "int32", "int64": "int64",
               "int8": "int8", "uint8": "uint8", "bool": "bool", "float64": "double"}
JSON_ATTR_TYPES = {"Int": "int", "Float": "float", "Bool": "bool", "String": "string", "ListInt": "list_int",
                   "ListFloat": "list_float", "ListBool": "list_bool"}


@dataclass(frozen=True)
class Step:
    """One command of a build; `name` says which part of the build failed."""

    name: str
    argv: tuple[str, ...]


def kernel_includes(toolchain: Toolchain) -> list[str]:
    """-I flags for kernel_operator.h and the CANN headers, as the installation's layout keeps them."""
    layout = toolchain.layout
    if layout is None:
        raise BackendError(f"no CANN layout was probed for {toolchain.ascend_home}; build the toolchain with "
                           "detect_toolchain()")
    return layout.include_flags()


def cann_link_flags(toolchain: Toolchain) -> list[str]:
    """-L, rpath and -l flags of the installation's layout (the libraries found there, in link order)."""
    return toolchain.layout.link_flags() if toolchain.layout else []


def _lib_dir_flags(toolchain: Toolchain) -> list[str]:
    """-L and rpath for the layout's library directories (lib64 where none was probed)."""
    dirs = toolchain.layout.lib_dirs if toolchain.layout else (str(toolchain.ascend_home / "lib64"),)
    return [flag for path in dirs for flag in (f"-L{path}", f"-Wl,-rpath,{path}")]


def direct_plan(toolchain: Toolchain, arch: str, headers: HostHeaders) -> list[Step]:
    """bisheng -xasc compiles kernel.cpp (device and host parts) into an object; bisheng links it with the
    prebuilt glue object into the candidate's Python module."""
    link = cann_link_flags(toolchain)
    return [
        Step("kernel", (toolchain.bisheng, "-xasc", f"--npu-arch={arch}", *KERNEL_FLAGS, "-I.",
                        *kernel_includes(toolchain), "-c", DIRECT_SOURCE, "-o", "kernel.o")),
        Step("runtime-check", (toolchain.bisheng, "-shared", "kernel.o", "-o", RUNTIME_CHECK, *link,
                               *RUNTIME_CHECK_FLAGS)),
        Step("link", (toolchain.bisheng, "-shared", "kernel.o", DIRECT_GLUE_OBJECT, "-o", MODULE_FILE, *link,
                      *torch_link_flags(headers))),
    ]


def opgen_spec(signature: OpSignature, dtypes: Sequence[str]) -> str:
    """The operator description msopgen generates its project skeleton from (the candidate's files then
    replace the skeleton's op_host and op_kernel sources)."""
    types = sorted({JSON_DTYPES.get(d, "float") for d in dtypes}) or ["float"]

    def tensors(names: Sequence[str], kinds: Sequence[str]) -> list[dict[str, object]]:
        # msopgen's param_type words are the OpDef's ParamType in lower case (required, optional, dynamic)
        return [{"name": n, "param_type": kind, "format": ["ND"] * len(types), "type": types}
                for n, kind in zip(names, kinds, strict=True)]

    return json.dumps([{
        "op": signature.op_type, "language": "cpp",
        "input_desc": tensors(signature.inputs, [signature.input_type(i) for i in range(len(signature.inputs))]),
        "output_desc": tensors(signature.outputs, [signature.output_type(i) for i in range(len(signature.outputs))]),
        "attr": [{"name": a.name, "param_type": "required", "type": JSON_ATTR_TYPES[a.type]} for a in signature.attrs],
    }], indent=2)


# The runs find the package's aclnn library at opp/vendors/<vendor>/op_api/lib (ASCEND_CUSTOM_OPP_PATH of
# the run names opp/vendors/<vendor>): an installer that put it elsewhere fails the build, not the run.
INSTALL_CHECK = (f'; test -f "{OPGEN_INSTALL}/vendors/{OPGEN_VENDOR}/op_api/lib/libcust_opapi.so" || '
                 f'{{ echo "[ERROR] the custom op package did not install into {OPGEN_INSTALL}/vendors/'
                 f'{OPGEN_VENDOR} (no op_api/lib/libcust_opapi.so there)"; exit 1; }}')


def msopgen_plan(toolchain: Toolchain, soc: str, headers: HostHeaders) -> list[Step]:
    """msopgen generates the custom-op project, the candidate's op_host / op_kernel sources replace the
    skeleton's, the project's build.sh (cmake presets, Release) builds and packs it, the package is installed
    into the build directory, and the glue (generated, or the task's own) is compiled and linked into the
    Python module."""
    shell = "/bin/sh"
    home = toolchain.ascend_home
    # the task's own glue may include CANN runtime headers (NPUKernelBench's GMM tasks: runtime/rt_ffts.h), as
    # upstream's glue build includes these directories (libs/common_include/msopgen/validation/CMakeLists.txt)
    glue_includes = (str(home / "include"), str(home / "include" / "experiment" / "runtime"),
                     str(home / "include" / "experiment" / "msprof"))
    install = (f'set -e; package=$(ls {OPGEN_PROJECT}/build_out/custom_opp_*.run | head -n 1); '
               f'"$package" --quiet --install-path="$PWD/{OPGEN_INSTALL}"')
    return [
        Step("msopgen", (toolchain.msopgen, "gen", "-i", OPGEN_SPEC, "-c", f"ai_core-{soc}", "-lan", "cpp",
                         "-out", OPGEN_PROJECT)),
        # the skeleton's sources go first: a candidate file named otherwise than msopgen names it would
        # otherwise build next to the skeleton's (two OpDefs of one operator)
        Step("place", (shell, "-c", f"rm -f {OPGEN_PROJECT}/op_host/*.cpp {OPGEN_PROJECT}/op_host/*.h "
                                    f"{OPGEN_PROJECT}/op_kernel/*.cpp {OPGEN_PROJECT}/op_kernel/*.h && "
                                    f"cp -r {CANDIDATE_DIR}/op_host {CANDIDATE_DIR}/op_kernel {OPGEN_PROJECT}/")),
        Step("build", (shell, "-c", f"{WITHOUT_CUSTOM_OPP}cd {OPGEN_PROJECT} && bash build.sh")),
        Step("install", (shell, "-c", WITHOUT_CUSTOM_OPP + install + INSTALL_CHECK)),
        Step("glue", (toolchain.host_cxx, *glue_flags(headers, glue_includes),
                      "-c", OPGEN_GLUE_SOURCE, "-o", "glue_op.o")),
        Step("link", (toolchain.host_cxx, "-shared", "glue_op.o", "-o", MODULE_FILE, *_lib_dir_flags(toolchain),
                      "-lascendcl", *torch_link_flags(headers))),
    ]


def direct_glue_step(toolchain: Toolchain, headers: HostHeaders, source: str, output: str) -> Step:
    """The one-time compile of the direct route's glue (kernelsage's own source)."""
    return Step("glue", (toolchain.host_cxx, *glue_flags(headers, (str(Path(source).parent),
                                                                   str(toolchain.ascend_home / "include"))),
                         "-c", source, "-o", output))
