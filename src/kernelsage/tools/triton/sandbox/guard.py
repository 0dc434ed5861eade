"""What the candidate's module may touch, enforced inside its own process (the sandboxed runner).

Standalone (stdlib and torch only): the judge copies this file into the sandbox, where kernelsage is not
installed. Two rules, the run-time half of "no borrowed compute" (the source check is the other half):

- the module runs with a reduced set of builtins whose `__import__` admits only triton, triton.language,
  math and torch, and which holds no open, eval, exec, getattr and the like;
- `ks_kernel` runs under a TorchDispatchMode that lets through only what moves or allocates memory
  (allocation, views, copies, fills): any other aten operator (torch.relu, x.sum(), a matmul) is refused,
  and the refusal is remembered outside the candidate's reach, so catching the exception does not help.

This process is the candidate's: code that escapes these rules still runs in the sandbox, with no reference
output, no judge and no clock to reach. The rules keep honest-but-lazy kernels honest; the sandbox and the
judge contain hostile ones (docs/triton.md).
"""

from __future__ import annotations

import builtins
import sys
import types
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

ALLOWED_PACKAGES = frozenset({"triton", "math", "torch"})
SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "int", "isinstance", "len", "list",
    "map", "max", "min", "pow", "print", "range", "reversed", "round", "sorted", "str", "sum", "tuple", "zip",
    "filter", "slice", "set", "frozenset", "hash", "iter", "next", "callable",
    "ArithmeticError", "AssertionError", "Exception", "IndexError", "KeyError", "NotImplementedError",
    "RuntimeError", "TypeError", "ValueError", "ZeroDivisionError", "True", "False", "None",
)
# aten operators that move or allocate memory without computing on it: what the triton interpreter itself
# issues (host copies of the arguments, set_ on storages, copy_ back) and what a kernel may need for scratch
# space or a dtype change. Matched on the operator's name without its overload.
MEMORY_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "zero_", "fill_", "full", "full_like", "set_", "copy_", "clone", "_to_copy", "contiguous", "lift_fresh",
    "lift_fresh_copy", "detach", "alias", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided",
    "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "select", "slice", "narrow", "unbind",
    "split", "split_with_sizes", "view_as", "flatten", "unflatten", "resize_",
    "is_same_size", "record_stream",
})


def safe_builtins() -> dict[str, Any]:
    """The builtins the candidate's module sees, with an import that admits only the allowed modules."""
    table = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    real_import = builtins.__import__

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                       level: int = 0) -> Any:
        # torch's C++ side imports its own submodules lazily through the current frame's builtins, which can
        # be the candidate's: submodules of an allowed package pass (the source check refuses them by name).
        if level != 0 or name.split(".")[0] not in ALLOWED_PACKAGES:
            raise ImportError(f"import of {name!r} refused: a candidate may import only triton, "
                              "triton.language, math and torch")
        return real_import(name, globals, locals, fromlist, level)

    table["__import__"] = guarded_import
    table["__build_class__"] = builtins.__build_class__  # class statements (a constexpr holder, say)
    return table


class Refusals:
    """The operators refused during the current call; kept here, out of the candidate's namespace."""

    def __init__(self) -> None:
        self.names: list[str] = []


def load_candidate(path: str) -> Any:
    """The candidate's file executed as a module with the guarded builtins; its ks_kernel."""
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    module = types.ModuleType("ks_candidate")
    module.__dict__.update(__builtins__=safe_builtins(), __file__=path)
    sys.modules["ks_candidate"] = module  # triton.jit reads the source back through the module
    exec(compile(source, path, "exec"), module.__dict__)
    kernel = module.__dict__.get("ks_kernel")
    if not callable(kernel):
        raise TypeError("kernel.py defines no function ks_kernel(inputs, outputs, attrs)")
    return kernel


def compute_guard(refusals: Refusals) -> TorchDispatchMode:
    """A dispatch mode that refuses (and records) every aten operator that computes."""

    class NoBorrowedCompute(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            if name.split(".")[-1] not in MEMORY_OPS:
                refusals.names.append(str(func))
                raise RuntimeError(f"kernelsage: {func} computes with torch; compute in @triton.jit kernels")
            return func(*args, **(kwargs or {}))

    return NoBorrowedCompute()
