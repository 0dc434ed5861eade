"""The host glue of a candidate: the Python module (pybind11) that takes NPU tensors and runs the candidate.

Direct route: one fixed source (`glue_direct.cpp`) calling `ks_launch` on the current NPU stream, compiled
once per toolchain and linked with each candidate's kernel. msopgen route: a source generated from the
operator's OpDef that calls its aclnn API through torch_npu's EXEC_NPU_CMD, as NPUKernelBench's
`kernel_gen_ops` does. Both compile with the host C++ compiler against the torch and torch_npu headers;
finding those headers never imports torch_npu (it cannot be imported without CANN).
"""

from __future__ import annotations

import importlib.util
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from kernelsage.tools.ascend.candidate import TUNING_MACROS_NAME, OpSignature
from kernelsage.tools.ascend.toolchain import ToolchainProblem

PACKAGE = Path(__file__).parent
HEADER = PACKAGE / "kernelsage_ascend.h"
TUNING_MACROS = PACKAGE / TUNING_MACROS_NAME  # KS_TUNABLE for host code; placed beside the host sources
DIRECT_GLUE = PACKAGE / "glue_direct.cpp"
MODULE_NAME = "kernelsage_ascend_candidate"  # the Python module every built candidate is
MODULE_FILE = f"{MODULE_NAME}.so"
# How an OpDef attribute type is passed to a custom op's aclnn API (the types msopgen's generated aclnn
# headers use), and how the Python side hands it to the glue.
ATTR_CXX = {"Int": "int64_t", "Float": "double", "Bool": "bool", "String": "std::string",
            "ListInt": "std::vector<int64_t>", "ListFloat": "std::vector<float>", "ListBool": "std::vector<bool>"}
# Each argument becomes a named local first: EXEC_NPU_CMD binds its arguments to non-const references.
ATTR_LOCAL = {"String": "char* {local} = const_cast<char*>({name}.c_str());",
              "ListInt": "at::IntArrayRef {local}({name});", "ListFloat": "at::ArrayRef<float> {local}({name});",
              "ListBool": "at::ArrayRef<bool> {local}({name});"}


@dataclass(frozen=True)
class HostHeaders:
    """Where the headers and libraries of torch, torch_npu and Python are, and torch's C++ ABI."""

    torch_includes: tuple[str, ...]
    torch_lib: str
    torch_npu_root: str
    python_include: str
    cxx11_abi: int
    torch_version: str = "2.13"  # major.minor: torch_npu's op-plugin headers select code by it

    @property
    def op_plugin_version(self) -> str:
        """The version macro torch_npu's op-plugin headers compare against (torch 2.13 -> V2R13)."""
        major, minor = self.torch_version.split(".")[:2]
        return f"V{major}R{minor}"

    @property
    def torch_npu_includes(self) -> tuple[str, ...]:
        root = Path(self.torch_npu_root) / "include"
        return (str(root), str(root / "third_party" / "acl" / "inc"), str(root / "third_party" / "op-plugin"),
                str(root / "third_party" / "hccl" / "inc"))

    @property
    def torch_npu_lib(self) -> str:
        return str(Path(self.torch_npu_root) / "lib")


def torch_npu_root() -> str:
    """The installed torch_npu package directory, found without importing it ('' when not installed)."""
    try:
        spec = importlib.util.find_spec("torch_npu")
    except (ImportError, ValueError):
        return ""
    locations = list(spec.submodule_search_locations or []) if spec else []
    return locations[0] if locations else ""


def host_headers(torch_npu_dir: str | None = None) -> HostHeaders:
    """The header locations of this environment; `torch_npu_dir` overrides where torch_npu's tree is."""
    import torch
    from torch.utils import cpp_extension

    root = torch_npu_dir if torch_npu_dir is not None else torch_npu_root()
    if not root or not (Path(root) / "include").is_dir():
        raise ToolchainProblem("torch_npu is not installed (its C++ headers are needed for the host glue): "
                               "pip install -e '.[npu]' (torch-npu matching torch "
                               f"{torch.__version__.split('+')[0]})")
    return HostHeaders(torch_includes=tuple(cpp_extension.include_paths()),
                       torch_lib=str(Path(torch.__file__).parent / "lib"), torch_npu_root=root,
                       python_include=sysconfig.get_paths()["include"], cxx11_abi=int(torch._C._GLIBCXX_USE_CXX11_ABI),
                       torch_version=".".join(torch.__version__.split("+")[0].split(".")[:2]))


def glue_flags(headers: HostHeaders, extra_includes: tuple[str, ...] = ()) -> list[str]:
    """Compiler flags of a glue source (Release: -O2, no debug info)."""
    includes = [*headers.torch_includes, *headers.torch_npu_includes, headers.python_include, *extra_includes]
    return ["-std=c++17", "-O2", "-DNDEBUG", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={headers.cxx11_abi}",
            "-DTORCH_API_INCLUDE_EXTENSION_H", f"-DTORCH_EXTENSION_NAME={MODULE_NAME}",
            f"-DCURRENT_VERSION={headers.op_plugin_version}",
            *(f"-I{path}" for path in includes)]


def glue_compile_command(cxx: str, headers: HostHeaders, source: str, output: str,
                         extra_includes: tuple[str, ...] = (), syntax_only: bool = False) -> list[str]:
    """The host compiler's command for a glue source (`syntax_only`: check it, produce nothing)."""
    tail = ["-fsyntax-only", source] if syntax_only else ["-c", source, "-o", output]
    return [cxx, *glue_flags(headers, extra_includes), *tail]


def torch_link_flags(headers: HostHeaders) -> list[str]:
    return [f"-L{headers.torch_lib}", f"-L{headers.torch_npu_lib}", f"-Wl,-rpath,{headers.torch_lib}",
            f"-Wl,-rpath,{headers.torch_npu_lib}", "-ltorch_npu", "-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10"]


def msopgen_glue_source(signature: OpSignature) -> str:
    """The glue of an msopgen candidate: inputs, attributes (typed as the OpDef declares them) and outputs
    passed to its aclnn API in the OpDef's order."""
    params = ["const std::vector<at::Tensor>& inputs", "const std::vector<at::Tensor>& outputs"]
    params += [f"const {ATTR_CXX[attr.type]}& attr_{attr.name}" for attr in signature.attrs]
    locals_ = [f"    const at::Tensor& input_{i} = inputs[{i}];" for i in range(len(signature.inputs))]
    for attr in signature.attrs:
        local = ATTR_LOCAL.get(attr.type, "{cxx} {local} = {name};")
        locals_.append("    " + local.format(cxx=ATTR_CXX[attr.type], local=f"arg_{attr.name}", name=f"attr_{attr.name}"))
    locals_ += [f"    const at::Tensor& output_{i} = outputs[{i}];" for i in range(len(signature.outputs))]
    args = [f"input_{i}" for i in range(len(signature.inputs))] + [f"arg_{a.name}" for a in signature.attrs]
    args += [f"output_{i}" for i in range(len(signature.outputs))]
    checks = (f'    TORCH_CHECK(inputs.size() == {len(signature.inputs)} && outputs.size() == '
              f'{len(signature.outputs)}, "kernelsage: {signature.op_type} takes {len(signature.inputs)} inputs '
              f'and {len(signature.outputs)} outputs");')
    return "\n".join([
        f"// Generated by kernelsage: calls the custom operator {signature.op_type} through aclnn{signature.op_type}.",
        "#include <torch/extension.h>",
        "",
        "#include <string>",
        "#include <vector>",
        "",
        '#include "op_plugin/utils/op_api_common.h"',
        "",
        f"int64_t run({', '.join(params)}) {{",
        checks,
        *locals_,
        f"    EXEC_NPU_CMD(aclnn{signature.op_type}, {', '.join(args)});",
        "    return 0;",
        "}",
        "",
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
        f'    m.def("run", &run, "Run {signature.op_type} on the current NPU stream.");',
        f'    m.attr("op_type") = "{signature.op_type}";',
        "}",
        "",
    ])
