"""The vocabulary of kernel.py's allowlist grammar (source_check.py walks the AST against it).

Every name a kernel may reach is listed here, by where it may appear: the members of the modules it may import,
the attributes and methods it may use on values (tensors, dtypes, sizes, the attrs dict) in ks_kernel and its
helpers ("host" code) and in @triton.jit bodies, and the builtins it may call. Anything else is refused: the
names Python offers for walking its own objects (gi_frame, f_back, f_globals, tb_frame, cr_frame, __class__...)
are on no list, so they fail closed without having to be known.
"""

from __future__ import annotations

import builtins
import importlib
import math
import types
from dataclasses import dataclass

TORCH = frozenset({
    "Tensor", "dtype", "Size", "empty", "empty_like", "empty_strided", "zeros", "zeros_like",
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16", "int32", "int64",
    "uint8", "bool", "long", "int", "short", "float8_e4m3fn", "float8_e5m2",
})
TRITON = frozenset({"jit", "cdiv", "next_power_of_2", "Config", "autotune", "heuristics"})
# triton.language's public API (3.x), without its modules: what a @triton.jit body computes with.
LANGUAGE = frozenset({
    "PropagateNan", "TRITON_MAX_TENSOR_NUMEL", "abs", "add", "advance", "arange", "argmax", "argmin",
    "associative_scan", "assume", "atomic_add", "atomic_and", "atomic_cas", "atomic_load", "atomic_max",
    "atomic_min", "atomic_or", "atomic_poll", "atomic_store", "atomic_xchg", "atomic_xor", "bfloat16",
    "bitonic_merge", "block_type", "broadcast", "broadcast_to", "cast", "cat", "cdiv", "ceil", "clamp", "condition",
    "const", "constexpr", "constexpr_type", "cos", "cumprod", "cumsum", "debug_barrier", "device_assert",
    "device_print", "div_rn", "dot", "dot_scaled", "dtype", "erf", "exp", "exp2", "expand_dims", "expect_zero",
    "fdiv", "flip", "float16", "float32", "float64", "float8e4b15", "float8e4b8", "float8e4nv", "float8e5",
    "float8e5b16", "floor", "fma", "full", "gather", "histogram", "inline_asm_elementwise", "int1", "int16",
    "int32", "int64", "int8", "interleave", "join", "load", "load_tensor_descriptor", "log", "log2",
    "make_block_ptr", "make_tensor_descriptor", "map_elementwise", "max", "max_constancy", "max_contiguous",
    "maximum", "min", "minimum", "mul", "multiple_of", "num_programs", "pair_uniform_to_normal", "permute",
    "philox", "philox_impl", "pi32_t", "pointer_type", "program_id", "rand", "rand4x", "randint", "randint4x",
    "randn", "randn4x", "range", "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "slice",
    "softmax", "sort", "split", "sqrt", "sqrt_rn", "squeeze", "static_assert", "static_print", "static_range",
    "store", "store_tensor_descriptor", "sub", "sum", "swizzle2d", "tensor", "tensor_descriptor", "to_tensor",
    "topk", "trans", "tuple", "uint16", "uint32", "uint64", "uint8", "uint_to_uniform_float", "umulhi",
    "unsqueeze", "view", "void", "where", "xor_sum", "zeros", "zeros_like",
})
MATH = frozenset(name for name in dir(math) if not name.startswith("_"))

# Attributes and methods on values. Host code sees torch tensors, dtypes, devices, sizes and the attrs dict;
# what computes on a tensor is not here (the run-time guard would refuse it anyway).
HOST_ATTRIBUTES = frozenset({
    "shape", "stride", "size", "numel", "dim", "ndim", "dtype", "device", "is_contiguous", "element_size",
    "itemsize", "nbytes", "is_floating_point", "is_signed", "is_cuda", "type", "index",
    "contiguous", "view", "view_as", "reshape", "flatten", "unsqueeze", "squeeze", "permute", "transpose", "t",
    "T", "expand", "to", "copy_", "fill_", "zero_", "new_empty", "new_zeros",
    "get", "keys", "values", "items",
})
# @triton.jit bodies see triton.language tensors, pointers, dtypes and constexprs. No `item` or `handle` (the
# interpreter's NumPy array).
JIT_ATTRIBUTES = frozenset({
    "T", "abs", "advance", "argmax", "argmin", "associative_scan", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_load", "atomic_max", "atomic_min", "atomic_or", "atomic_poll", "atomic_store", "atomic_xchg",
    "atomic_xor", "broadcast_to", "cast", "cdiv", "ceil", "cos", "cumprod", "cumsum", "erf", "exp", "exp2",
    "expand_dims", "flip", "floor", "gather", "histogram", "log", "log2", "logical_and", "logical_or", "max",
    "min", "permute", "ravel", "reduce", "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "softmax", "sort",
    "split", "sqrt", "sqrt_rn", "store", "sum", "to", "trans", "view", "xor_sum",
    "dtype", "element_ty", "shape", "numel", "value", "scalar", "primitive_bitwidth", "int_bitwidth",
    "is_floating", "is_int", "is_int_signed", "is_int_unsigned", "is_fp16", "is_bf16", "is_fp32", "is_fp64",
    "is_ptr", "is_block",
})
HOST_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "divmod", "enumerate", "float", "int", "isinstance", "len", "list", "max", "min",
    "pow", "print", "range", "reversed", "round", "str", "sum", "tuple", "zip",
})
JIT_BUILTINS = frozenset({"abs", "bool", "float", "int", "len", "max", "min", "range"})
CONSTANT_BUILTINS = frozenset({"abs", "bool", "float", "int", "max", "min", "pow", "round"})
# What a module-level constant may call besides those (and math's functions): nothing that allocates, so no
# tensor outlives a call. Dicts of constants are allowed (no name on the lists changes a dict); lists are not
# (`sort` is a name a @triton.jit body may use).
CONSTANT_CALLS = frozenset({"triton.language.constexpr", "triton.cdiv", "triton.next_power_of_2"})
EXCEPTIONS = frozenset({
    "AssertionError", "IndexError", "KeyError", "NotImplementedError", "RuntimeError", "TypeError", "ValueError",
})
ANNOTATION_NAMES = frozenset({"bool", "dict", "float", "int", "list", "str", "tuple"})
# Names the runtime itself puts where an undefined name would be looked up: the builtins, and what the triton
# interpreter copies into the module's globals when it first runs a @triton.jit function (NumPy as `np`,
# inspect, the interpreter's own classes). Any name kernel.py does not define is refused; these as forbidden.
BUILTIN_NAMES = frozenset(dir(builtins))
RUNTIME_NAMES = frozenset({
    "np", "inspect", "ast", "textwrap", "time", "math", "triton", "tl", "dataclasses", "dataclass", "partial",
    "interpreter_builder", "interpreter_semantic", "InterpreterBuilder", "GridExecutor", "TensorHandle",
    "FunctionRewriter", "InterpretedFunction", "ASTTransformer", "annotations",
})

# Decorators of @triton.jit functions: their keywords, each with literal values only (no hooks, no callables).
JIT_KEYWORDS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"})
AUTOTUNE_KEYWORDS = frozenset({"configs", "key", "reset_to_zero", "restore_value", "warmup", "rep",
                               "use_cuda_graph", "cache_results"})
CONFIG_KEYWORDS = frozenset({"kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg"})

LANGUAGE_PATH = "triton.language"
IMPORTABLE = ("triton", LANGUAGE_PATH, "math", "torch")


@dataclass(frozen=True)
class Member:
    """What `module.name` is: a module (path set), an object kernels may use, or a refusal (why set)."""

    path: str = ""
    module: bool = False
    why: str = ""


def member(module: str, name: str) -> Member:
    """The member `name` of the allowed module `module` (a dotted path)."""
    dotted = f"{module}.{name}"
    if name.startswith("_"):
        return Member(why=f"private name {dotted!r}")
    if module == "torch":
        return Member(dotted) if name in TORCH else Member(
            why=f"{dotted}: torch is for dtypes and allocation only ({_few(TORCH)}); compute in @triton.jit kernels")
    if module == "math":
        return Member(dotted) if name in MATH else Member(why=f"{dotted} is not in the math module")
    if module == "triton":
        if name == "language":
            return Member(LANGUAGE_PATH, module=True)
        return Member(dotted) if name in TRITON else Member(
            why=f"{dotted}: kernels may use triton.{', triton.'.join(sorted(TRITON))} and triton.language")
    if module == LANGUAGE_PATH:
        if name in ("math", "extra"):
            return Member(dotted, module=True)
        if name in LANGUAGE:
            return Member(dotted)
        # Not on the list: refused if this triton has it (tl.core, tl.random...); a name it lacks is left to
        # the compiler, whose "has no attribute" is the feedback (and another build's triton may have it).
        return Member(why=f"{dotted} is not on the list of triton.language names kernels may use") \
            if _resolve(dotted) is not _MISSING else Member(dotted)
    if module == f"{LANGUAGE_PATH}.extra":  # tl.extra.libdevice, tl.extra.cuda (.libdevice), tl.extra.hip...
        found = _resolve(dotted)
        if found is _MISSING or (isinstance(found, types.ModuleType) and found.__name__ == dotted):
            return Member(dotted, module=True)
        return Member(why=f"{dotted} is not a triton.language.extra namespace")
    if module.startswith(f"{LANGUAGE_PATH}.extra.") and not module.endswith(".libdevice"):
        return Member(dotted, module=True) if name == "libdevice" else Member(
            why=f"{dotted}: only {module}.libdevice")
    if module == f"{LANGUAGE_PATH}.math" or module.endswith(".libdevice"):
        found = _resolve(dotted)
        if found is _MISSING or (callable(found) and not isinstance(found, type)
                                 and str(getattr(found, "__module__", "")).startswith(LANGUAGE_PATH)):
            return Member(dotted)
        return Member(why=f"{dotted} is not one of {module}'s functions")
    return Member(why=f"{dotted}: {module} has no members kernels may use")


def importable(path: str) -> bool:
    """A module kernel.py may import: triton, triton.language and its math and libdevice modules, math, torch."""
    if path in IMPORTABLE:
        return True
    parent, _, name = path.rpartition(".")
    return bool(parent) and importable(parent) and member(parent, name).module


def _few(names: frozenset[str]) -> str:
    return ", ".join(sorted(names)[:8]) + ", ..."


_MISSING = object()


def _resolve(dotted: str) -> object:
    """The object at `dotted` in the triton installed here, _MISSING where it has none (or no triton)."""
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, _MISSING)
    except ImportError:
        try:  # a submodule not imported by its package (triton.language.extra.libdevice)
            return importlib.import_module(dotted)
        except ImportError:
            return _MISSING
