"""The static half of "no borrowed compute": kernel.py read with `ast` against an allowlist grammar.

A denylist of names fails open (a running generator's gi_frame.f_back.f_globals reached the runner's modules
without one refused token); this check fails closed. At module level: imports of triton, triton.language,
math and torch, @triton.jit functions (decorated by triton.autotune / triton.heuristics with literal
configurations at most), ks_kernel and other plain functions, and constants. In ks_kernel and its helpers
("host" code): arithmetic and comparisons, the tensor attributes and methods of grammar.HOST_ATTRIBUTES,
allocation through torch, launches `kernel[grid](...)` of the file's own @triton.jit functions (a grid may be
`lambda meta: ...`), the builtins of grammar.HOST_BUILTINS, if/for/while, assignment to names, return, assert
and raise of a plain exception. In a @triton.jit body: triton.language, arithmetic, the tensor attributes of
grammar.JIT_ATTRIBUTES, calls of the file's other @triton.jit functions, control flow and assignment. Every
name must be defined in the file (the interpreter puts NumPy into the module's globals as `np`). Refused
everywhere: generators, coroutines, comprehensions, other lambdas, try/with/del/global, classes, walrus,
assignment to attributes or subscripts (no state kept between calls), mutable constants. The run-time half
(sandbox/guard.py) refuses aten operators that compute.
"""
from __future__ import annotations

import ast

from kernelsage.tools.triton import grammar as g
from kernelsage.tools.triton.grammar_walk import (
    CONSTANT,
    FILE,
    HOST,
    JIT,
    Scope,
    SourceProblem,
    Walker,
    bound_anywhere,
    bound_names,
    is_literal,
)

__all__ = ["FILE", "SourceProblem", "check_source"]


def check_source(source: str) -> list[SourceProblem]:
    """Every rule kernel.py breaks ([] when it may run)."""
    try:
        tree = ast.parse(source, filename=FILE)
    except SyntaxError as exc:
        return [SourceProblem(exc.lineno or 0, exc.offset or 0, f"SyntaxError: {exc.msg}", forbidden=False)]
    checker = _Checker(tree)
    checker.check_module(tree)
    if "ks_kernel" not in checker.helpers:
        checker.problems.append(SourceProblem(0, 0, "kernel.py defines no top-level function ks_kernel(inputs, "
                                                    "outputs, attrs)", forbidden=False))
    return checker.problems


class _Checker(Walker):
    """The module level of kernel.py: its imports, constants and functions (their bodies are the Walker's)."""

    def check_module(self, tree: ast.Module) -> None:
        for node in tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.imported(node, alias.name, alias.asname or alias.name.split(".")[0],
                                  alias.name if alias.asname else alias.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                self.import_from(node)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                pass  # a docstring
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                self.module_constant(node)
            elif isinstance(node, ast.FunctionDef):
                self.function(node)
            else:
                self.construct(node, "at module level (kernel.py holds imports, @triton.jit functions, ks_kernel "
                                     "and other plain functions, and constants)")
                self.descend(node, Scope(HOST, bound_anywhere(node)))

    def imported(self, node: ast.AST, path: str, name: str, bound: str) -> None:
        if not g.importable(path):
            self.refuse(node, f"import of {path!r}: only triton, triton.language, math and torch")
        else:
            self.modules[name] = bound

    def import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module == "__future__" and not node.level:
            return
        if node.level or not g.importable(module):
            self.refuse(node, f"import from {module or '.'!r}: only triton, triton.language, math and torch")
            return
        for alias in node.names:
            if alias.name == "*":
                self.refuse(node, f"from {module} import *: name what you use")
                continue
            found = g.member(module, alias.name)
            if found.why:
                self.refuse(node, found.why)
            elif found.module:
                self.modules[alias.asname or alias.name] = found.path
            else:
                self.objects[alias.asname or alias.name] = found.path

    def module_constant(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if isinstance(node, ast.AnnAssign):
            self.annotation(node.annotation)
        for target in targets:
            names = bound_names(target)
            taken = self.jit | self.helpers | set(self.modules) | set(self.objects)
            if not names or any(name in taken or name.startswith("__") for name in names):
                self.refuse(target, "at module level only constants may be assigned, each to a new name")
        self.expr(node.value, Scope(CONSTANT))

    def function(self, node: ast.FunctionDef) -> None:
        jit = node.name in self.jit
        if jit:
            self.decorators(node)
        if node.name.startswith("__") or node.name in self.modules or node.name in self.objects:
            self.refuse(node, f"the function name {node.name!r} is not allowed")
        scope = Scope(JIT if jit else HOST)
        self.arguments(node.args, scope)
        if node.returns is not None:
            self.annotation(node.returns)
        for child in node.body:
            scope.names |= bound_anywhere(child)
        self.block(node.body, scope)

    def arguments(self, args: ast.arguments, scope: Scope) -> None:
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                self.refuse(extra, f"*{extra.arg} / **{extra.arg} parameters are not allowed")
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            self.binds(arg, arg.arg)
            scope.names.add(arg.arg)
            if arg.annotation is not None:
                self.annotation(arg.annotation)
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            if not is_literal(default):
                self.refuse(default, "a default value must be a literal (a number, a string, True, False, None)")
                self.expr(default, Scope(HOST, bound_anywhere(default)))

    def decorators(self, node: ast.FunctionDef) -> None:
        *outer, inner = node.decorator_list
        call = inner if isinstance(inner, ast.Call) else None
        if self.dotted(call.func if call else inner) != "triton.jit":
            self.refuse(inner, f"the decorator next to def {node.name} must be @triton.jit")
        elif call:
            self.decorator_call(call, g.JIT_KEYWORDS, positional=0)
        for decorator in outer:
            kind = self.dotted(decorator.func) if isinstance(decorator, ast.Call) else ""
            if kind == "triton.autotune" and isinstance(decorator, ast.Call):
                self.decorator_call(decorator, g.AUTOTUNE_KEYWORDS, positional=2)
            elif kind == "triton.heuristics" and isinstance(decorator, ast.Call):
                self.decorator_call(decorator, frozenset({"values"}), positional=1, lambdas=True)
            else:
                self.refuse(decorator, "only @triton.autotune(...) and @triton.heuristics(...) may decorate a "
                                       "@triton.jit function")

    def decorator_call(self, call: ast.Call, keywords: frozenset[str], *, positional: int,
                       lambdas: bool = False) -> None:
        if len(call.args) > positional:
            self.refuse(call, f"at most {positional} positional arguments here")
        for keyword in call.keywords:
            if keyword.arg not in keywords:
                self.refuse(keyword.value, f"the keyword {keyword.arg or '**'} is not allowed here (allowed: "
                                           f"{', '.join(sorted(keywords))})")
        for value in [*call.args, *(k.value for k in call.keywords)]:
            self.decorator_value(value, lambdas)

    def decorator_value(self, node: ast.expr, lambdas: bool) -> None:
        """Literals, lists and dicts of them, triton.Config(...) and, for heuristics, `lambda args: ...`."""
        if isinstance(node, (ast.List, ast.Tuple)):
            for element in node.elts:
                self.decorator_value(element, lambdas)
        elif isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):
            for value in node.values:
                self.decorator_value(value, lambdas)
        elif isinstance(node, ast.Call) and self.dotted(node.func) == "triton.Config":
            self.decorator_call(node, g.CONFIG_KEYWORDS, positional=1)
        elif isinstance(node, ast.Lambda) and lambdas:
            self.lambda_(node, Scope(HOST))
        elif not (is_literal(node) or (isinstance(node, ast.Name) and node.id in self.constants)):
            self.refuse(node, "decorator arguments are literals, constants, triton.Config(...) and heuristics' lambdas")

    # Statements


# What cannot run on an Ascend NPU (the npu-frontend and npu devices), read from triton-ascend 3.2.0 as installed
# and its API reference: its `triton.language.extra` holds `ascend` and the dispatching `libdevice`, no `cuda` or
# `hip`; its dtype tables mark fp64 and the fp8 types unsupported on Ascend A2/A3 for every operation, and
# `dot_scaled` for every dtype.
NPU_REFUSED = {
    "triton.language.inline_asm_elementwise": "inline assembly is written in one GPU's instruction set (PTX, "
                                              "AMDGCN), which triton-ascend does not compile for the NPU",
    "triton.language.extra.cuda": "a CUDA-only module (NVIDIA's libdevice and PTX helpers); use "
                                  "triton.language.extra.libdevice or tl.math",
    "triton.language.extra.hip": "an AMD-only module; use triton.language.extra.libdevice or tl.math",
    "triton.language.dot_scaled": "triton-ascend supports dot_scaled for no dtype; use tl.dot",
    "triton.language.float64": "Ascend A2/A3 NPUs compute no fp64 in triton-ascend (its dtype tables)",
    **{f"triton.language.{name}": "Ascend A2/A3 NPUs have no fp8 types in triton-ascend (its dtype tables)"
       for name in ("float8e4nv", "float8e5", "float8e4b15", "float8e4b8", "float8e5b16")},
}


def npu_problems(source: str) -> list[SourceProblem]:
    """What in kernel.py cannot run on an Ascend NPU (NPU_REFUSED), one problem per name and line; [] where
    nothing is found (or the file does not parse: check_source says why)."""
    try:
        tree = ast.parse(source, filename=FILE)
    except SyntaxError:
        return []
    names = _Checker(tree)
    names.check_module(tree)  # for the names it binds (imports): its own problems are check_source's
    found: dict[tuple[int, str], SourceProblem] = {}
    for node in ast.walk(tree):
        for path in _paths(node, names):
            refused = next((key for key in NPU_REFUSED if path == key or path.startswith(key + ".")), None)
            line = getattr(node, "lineno", 0)
            if refused and (line, refused) not in found:
                found[(line, refused)] = SourceProblem(
                    line, getattr(node, "col_offset", 0), f"{FILE} line {line}: {path} cannot run on an Ascend NPU: "
                    f"{NPU_REFUSED[refused]}", forbidden=False)
    return sorted(found.values(), key=lambda problem: (problem.line, problem.column))


def _paths(node: ast.AST, names: _Checker) -> list[str]:
    """The dotted paths `node` names: the modules an import reads, a name or attribute bound to a module member."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    if isinstance(node, ast.Name):
        return [path for path in (names.objects.get(node.id), names.modules.get(node.id)) if path]
    if isinstance(node, ast.Attribute):
        parent = _paths(node.value, names)
        return [f"{parent[0]}.{node.attr}"] if parent else []
    return []
