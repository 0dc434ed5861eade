"""The static half of "no borrowed compute": what kernel.py may import, name and reach, read with `ast`.

Imports: triton, triton.language, math and torch only (no star imports). torch is for types and allocation
(dtypes, Tensor, empty, zeros...), triton for jit, cdiv, autotune and the like, and a chain through
triton.language may pass only through its own modules (tl.math, tl.extra.cuda.libdevice), never through what
they import (tl.core.builtins). A module is used only through an attribute (no `t = torch`). No private or
dunder attribute or name, none of the builtins that reach objects by name or run code (getattr, eval, open...),
and none of the tensor methods that hand its data to Python (numpy, tolist, item) or the interpreter's own
arrays (handle). The run-time half (sandbox/guard.py) refuses aten operators that compute.
"""

from __future__ import annotations

import ast
import importlib
import types
from dataclasses import dataclass

FILE = "kernel.py"
ALLOWED_MODULES = ("triton", "triton.language", "math", "torch")
TORCH_NAMES = frozenset({
    "Tensor", "dtype", "Size", "empty", "empty_like", "empty_strided", "zeros", "zeros_like",
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16", "int32", "int64",
    "uint8", "bool", "long", "int", "short", "float8_e4m3fn", "float8_e5m2",
})
TRITON_NAMES = frozenset({"jit", "cdiv", "next_power_of_2", "Config", "autotune", "heuristics", "language"})
FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "open", "getattr", "setattr", "delattr", "globals", "locals", "vars", "dir",
    "breakpoint", "input", "memoryview", "type", "super", "object", "help", "exit", "quit", "classmethod",
    "staticmethod", "property", "id", "bytearray", "bytes",
})
FORBIDDEN_ATTRIBUTES = frozenset({
    "numpy", "tolist", "item", "storage", "untyped_storage", "data", "apply_", "map_", "map2_", "handle",
    "grad", "grad_fn", "backward", "register_hook",
})


@dataclass(frozen=True)
class SourceProblem:
    line: int
    column: int
    message: str
    forbidden: bool  # a rule of the backend (FORBIDDEN), not a mistake in the Python (COMPILE_ERROR)


def check_source(source: str) -> list[SourceProblem]:
    """Every rule kernel.py breaks ([] when it may run)."""
    try:
        tree = ast.parse(source, filename=FILE)
    except SyntaxError as exc:
        return [SourceProblem(exc.lineno or 0, exc.offset or 0, f"SyntaxError: {exc.msg}", forbidden=False)]
    checker = _Checker()
    checker.visit(tree)
    problems = checker.problems
    if not any(isinstance(node, ast.FunctionDef) and node.name == "ks_kernel" for node in tree.body):
        problems.append(SourceProblem(0, 0, "kernel.py defines no top-level function ks_kernel(inputs, outputs, "
                                            "attrs)", forbidden=False))
    return problems


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.problems: list[SourceProblem] = []
        self.modules: dict[str, str] = {}  # a local name -> the module it stands for

    def refuse(self, node: ast.AST, message: str) -> None:
        self.problems.append(SourceProblem(getattr(node, "lineno", 0), getattr(node, "col_offset", 0), message,
                                           forbidden=True))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _allowed_module(alias.name):
                self.refuse(node, f"import of {alias.name!r}: only triton, triton.language, math and torch")
            elif alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                self.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level or not _allowed_module(module):
            self.refuse(node, f"import from {module or '.'!r}: only triton, triton.language, math and torch")
            return
        for alias in node.names:
            if alias.name == "*":
                self.refuse(node, f"from {module} import *: name what you use")
            elif self._allowed_member(node, module, alias.name):
                target = f"{module}.{alias.name}"
                if isinstance(_resolve(target), types.ModuleType):
                    self.modules[alias.asname or alias.name] = target

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__") or node.id in FORBIDDEN_NAMES:
            self.refuse(node, f"the name {node.id!r} is not available to kernels")
        elif node.id in self.modules:
            self.refuse(node, f"the module {node.id!r} used as a value: use its attributes only (e.g. tl.load)")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            self.refuse(node, f"private attribute {node.attr!r}")
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self.refuse(node, f"attribute {node.attr!r}: a kernel may not hand tensor data to Python")
        chain = _chain(node)
        if chain and chain[0] in self.modules:
            for part in chain[1:-1]:  # the outermost was checked above
                if part.startswith("_") or part in FORBIDDEN_ATTRIBUTES:
                    self.refuse(node, f"attribute {part!r} is not available to kernels")
            self._allowed_member(node, self.modules[chain[0]], ".".join(chain[1:]))
            return  # the chain's head is a module: visiting it as a Name would refuse it
        self.generic_visit(node)

    def _allowed_member(self, node: ast.AST, module: str, path: str) -> bool:
        first = path.split(".")[0]
        if module == "torch" and first not in TORCH_NAMES:
            self.refuse(node, f"torch.{path}: torch is for types and allocation only; compute in @triton.jit kernels")
            return False
        if module == "triton" and first not in TRITON_NAMES:
            self.refuse(node, f"triton.{path}: kernels may use triton.{', triton.'.join(sorted(TRITON_NAMES))}")
            return False
        if module.startswith("triton"):
            return self._within_language(node, module, path)
        return True

    def _within_language(self, node: ast.AST, module: str, path: str) -> bool:
        """A chain through triton.language passes only through triton.language's own modules (or math)."""
        current: object = importlib.import_module(module)
        for part in path.split("."):
            current = getattr(current, part, None)
            if isinstance(current, types.ModuleType) and not (
                    current.__name__.startswith("triton.language") or current.__name__ == "math"):
                self.refuse(node, f"{module}.{path} reaches the module {current.__name__!r}")
                return False
        return True


def _allowed_module(name: str) -> bool:
    """triton, triton.language (and its own submodules: tl.extra.cuda.libdevice), math, torch."""
    return name in ALLOWED_MODULES or name.startswith("triton.language.")


def _chain(node: ast.Attribute) -> list[str]:
    """['tl', 'math', 'exp'] for tl.math.exp; [] when the chain does not start at a plain name."""
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return [current.id, *reversed(parts)] if isinstance(current, ast.Name) else []


def _resolve(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
