"""What an Ascend candidate consists of, and which route builds it.

- direct (the main route, the one the prompts teach): one file `kernel.cpp` holding the Ascend C device
  kernel(s) and the host function `ks_launch` that computes the tiling and launches them with `<<<>>>` on the
  stream it is given (`kernelsage_ascend.h`); optional plain-named headers beside it.
- msopgen (NPUKernelBench answers): `op_host/<op>.cpp` (the OpDef, its shape inference and TilingFunc),
  `op_kernel/<op>.cpp` (`extern "C" __global__ __aicore__ void <op>(GM_ADDR ..., GM_ADDR workspace,
  GM_ADDR tiling)`), and optionally `op_host/<op>_tiling.h` (and `op_host/ks_tuning.h`, the configuration
  `kernelsage tune` is trying). The operator is built as a custom op package and called through its
  generated aclnn API.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DIRECT, MSOPGEN, SUITE = "direct", "msopgen", "suite"  # suite: msopgen built through the task's own glue
DIRECT_SOURCE = "kernel.cpp"
# `kernelsage tune`'s configuration, beside the host sources (kernel.cpp, or op_host/), where the build also
# places kernelsage's KS_TUNABLE header, which includes it (docs/tuning.md)
TUNING_HEADER, TUNING_MACROS_NAME = "ks_tuning.h", "kernelsage_tuning.h"
HEADER_SUFFIXES = (".h", ".hpp")
OP_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
OP_ADD = re.compile(r"\bOP_ADD\s*\(\s*(\w+)\s*\)")
DECLARATION = re.compile(r"\b(?P<kind>Input|Output|Attr)\s*\(\s*\"(?P<name>\w+)\"\s*\)(?P<chain>[^;]*)")
ATTR_TYPES = ("ListInt", "ListFloat", "ListBool", "Int", "Float", "Bool", "String")
# How an OpDef declares an input or output (`.ParamType(...)`): one tensor, a tensor that may be absent
# (c10::optional, None from Python), or a tensor list (at::TensorList, a Python list).
REQUIRED, OPTIONAL, DYNAMIC = "required", "optional", "dynamic"
PARAM_TYPE = re.compile(r"\.ParamType\s*\(\s*(REQUIRED|OPTIONAL|DYNAMIC)\s*\)")


@dataclass(frozen=True)
class Layout:
    """A candidate's route and, for msopgen, its operator (snake_case file name)."""

    route: str
    op: str = ""


@dataclass(frozen=True)
class OpAttr:
    name: str
    type: str  # one of ATTR_TYPES


@dataclass(frozen=True)
class OpSignature:
    """The operator an OpDef declares: type name, inputs, outputs and attributes in declaration order, and how
    each input and output is passed (REQUIRED, OPTIONAL or DYNAMIC; all REQUIRED where none is given)."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[OpAttr, ...]
    input_types: tuple[str, ...] = ()
    output_types: tuple[str, ...] = ()

    def input_type(self, index: int) -> str:
        return self.input_types[index] if self.input_types else REQUIRED

    def output_type(self, index: int) -> str:
        return self.output_types[index] if self.output_types else REQUIRED


class LayoutError(ValueError):
    """The candidate's files fit neither route (the message says what is wrong and what is expected)."""


def snake_case(op_type: str) -> str:
    """msopgen's file name of an operator type ('AddCustom' -> 'add_custom')."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", op_type).lower()


def snake_case_words(op_type: str) -> str:
    """NPUKernelBench's file name of an operator type, which splits a capital before a word
    ('MulMulReduceMeanDTwice' -> 'mul_mul_reduce_mean_d_twice'; `framework/task_object.py` camel_to_snake)."""
    words = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", op_type)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", words).lower()


def camel_case(op: str) -> str:
    """The operator type of a file name ('add_custom' -> 'AddCustom')."""
    return "".join(part[:1].upper() + part[1:] for part in op.split("_"))


def _plain(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


def classify_layout(files: dict[str, str]) -> Layout:
    """The route of a candidate's file set; raises LayoutError with what is expected."""
    if not files:
        raise LayoutError("the candidate has no files")
    names = sorted(files)
    if any(name.startswith(("op_host/", "op_kernel/")) for name in names):
        hosts = [n.split("/", 1)[1] for n in names if n.startswith("op_host/") and n.endswith(".cpp")]
        kernels = [n.split("/", 1)[1] for n in names if n.startswith("op_kernel/") and n.endswith(".cpp")]
        if len(kernels) != 1 or len(hosts) != 1 or hosts[0] != kernels[0]:
            raise LayoutError(f"an msopgen candidate has op_host/<op>.cpp and op_kernel/<op>.cpp with the same "
                              f"<op>; got {names}")
        op = kernels[0].removesuffix(".cpp")
        if not OP_NAME.match(op):
            raise LayoutError(f"operator file name {op!r} must be snake_case (letters, digits, underscores)")
        allowed = {f"op_host/{op}.cpp", f"op_kernel/{op}.cpp", f"op_host/{op}_tiling.h", f"op_kernel/{op}_tiling.h",
                   f"op_host/{TUNING_HEADER}"}
        extra = [n for n in names if n not in allowed]
        if extra:
            raise LayoutError(f"unexpected files in an msopgen candidate: {extra}; allowed: {sorted(allowed)}")
        return Layout(MSOPGEN, op)
    for name in names:
        if not _plain(name) or not name.endswith((".cpp", *HEADER_SUFFIXES)):
            raise LayoutError(f"file name {name!r} is not allowed: a direct-launch candidate is {DIRECT_SOURCE} "
                              f"plus optional plain-named headers ({', '.join(HEADER_SUFFIXES)})")
    sources = [n for n in names if n.endswith(".cpp")]
    if sources != [DIRECT_SOURCE]:
        raise LayoutError(f"a direct-launch candidate has exactly one source, {DIRECT_SOURCE}; got {sources}")
    return Layout(DIRECT)


def parse_op_signature(op_host_source: str, op: str) -> OpSignature:
    """The inputs, outputs and attributes an OpDef declares, in order; raises LayoutError when it has none."""
    added = OP_ADD.search(op_host_source)
    op_type = added.group(1) if added else camel_case(op)
    inputs, outputs, attrs, input_types, output_types = [], [], [], [], []
    for match in DECLARATION.finditer(op_host_source):
        declared = PARAM_TYPE.search(match["chain"])
        param_type = declared.group(1).lower() if declared else REQUIRED
        if match["kind"] == "Input":
            inputs.append(match["name"])
            input_types.append(param_type)
        elif match["kind"] == "Output":
            outputs.append(match["name"])
            output_types.append(param_type)
        else:
            chain = match["chain"]
            kind = next((t for t in ATTR_TYPES if re.search(rf"\.{t}\s*\(", chain)), "")
            if not kind:
                raise LayoutError(f"attribute {match['name']!r} of {op_type} has no type (.Int/.Float/.Bool/"
                                  ".ListInt/.String ...)")
            attrs.append(OpAttr(match["name"], kind))
    if not inputs and not outputs:  # an in-place operator has inputs only
        raise LayoutError(f"op_host/{op}.cpp declares no Input(...) or Output(...) in its OpDef")
    if op not in (snake_case(op_type), snake_case_words(op_type)):
        raise LayoutError(f"OP_ADD({op_type}) does not match the file names op_host/{op}.cpp (expected "
                          f"OP_ADD({camel_case(op)}))")
    return OpSignature(op_type, tuple(inputs), tuple(outputs), tuple(attrs), tuple(input_types), tuple(output_types))
