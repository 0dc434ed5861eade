"""What a function body of kernel.py may hold, and every expression in it: the statements, names, attributes,
calls and lambdas of the allowlist grammar (source_check.py applies it from module level down; grammar.py holds
the vocabulary). Anything not on a list is refused, so the check fails closed."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelsage.tools.triton import grammar as g

FILE = "kernel.py"
HOST, JIT, CONSTANT = "host", "jit", "constant"
CONSTRUCTS = {
    ast.GeneratorExp: "a generator expression", ast.ListComp: "a list comprehension", ast.SetComp:
    "a set comprehension", ast.DictComp: "a dict comprehension", ast.Yield: "yield", ast.YieldFrom: "yield from",
    ast.Await: "await", ast.Lambda: "a lambda (only `lambda meta: ...` as a launch grid or heuristic)",
    ast.NamedExpr: "an assignment expression (:=)", ast.ClassDef: "a class", ast.AsyncFunctionDef:
    "an async function", ast.Try: "try", ast.With: "with", ast.Delete: "del", ast.Global: "global", ast.Nonlocal:
    "nonlocal", ast.Starred: "a starred expression", ast.Set: "a set", ast.Import: "an import inside a function",
    ast.ImportFrom: "an import inside a function", ast.FunctionDef: "a function inside a function",
    ast.Raise: "raise (only in ks_kernel or a helper)", ast.Dict: "a dict",
}


@dataclass(frozen=True)
class SourceProblem:
    line: int
    column: int
    message: str
    forbidden: bool  # a rule of the backend (FORBIDDEN), not a mistake in the Python (COMPILE_ERROR)


@dataclass
class Scope:
    context: str  # HOST, JIT or CONSTANT
    names: set[str] = field(default_factory=set)  # parameters and locals


class Walker:
    """The walk of function bodies and expressions; its problems, and what the module defines."""


    def __init__(self, tree: ast.Module) -> None:
        self.problems: list[SourceProblem] = []
        self.modules: dict[str, str] = {}  # a local name -> the module it stands for
        self.objects: dict[str, str] = {}  # a local name -> the module member it was imported as
        self.jit = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list}
        self.helpers = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.decorator_list}
        self.refused = {n.name for n in tree.body if isinstance(n, (ast.AsyncFunctionDef, ast.ClassDef))}
        # Globals are looked up when a function runs: a constant may be defined below the function using it.
        self.constants = {name for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                          for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) for name in bound_names(t)}

    def refuse(self, node: ast.AST, message: str, *, forbidden: bool = True) -> None:
        line = getattr(node, "lineno", 0)
        self.problems.append(SourceProblem(line, getattr(node, "col_offset", 0), f"{FILE} line {line}: {message}",
                                           forbidden=forbidden))

    def construct(self, node: ast.AST, where: str) -> None:
        name = CONSTRUCTS.get(type(node), f"the construct {type(node).__name__}")
        self.refuse(node, f"{name} is not allowed {where}")

    def block(self, body: list[ast.stmt], scope: Scope) -> None:
        for node in body:
            self.statement(node, scope)

    def statement(self, node: ast.stmt, scope: Scope) -> None:
        where = "in a @triton.jit function" if scope.context == JIT else "in ks_kernel or a helper"
        if isinstance(node, ast.Assign):
            for target in node.targets:
                self.target(target)
            grid = len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and scope.context == HOST
            self.expr(node.value, scope, lambdas=grid)
        elif isinstance(node, ast.AugAssign):
            self.target(node.target, tuples=False)
            self.expr(node.value, scope)
        elif isinstance(node, ast.AnnAssign):
            self.target(node.target, tuples=False)
            self.annotation(node.annotation)
            if node.value is not None:
                self.expr(node.value, scope)
        elif isinstance(node, ast.Expr):
            self.expr(node.value, scope)
        elif isinstance(node, (ast.If, ast.While)):
            self.expr(node.test, scope)
            self.block(node.body, scope)
            self.block(node.orelse, scope)
        elif isinstance(node, ast.For):
            self.target(node.target)
            self.expr(node.iter, scope)
            self.block(node.body, scope)
            self.block(node.orelse, scope)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value, scope)
        elif isinstance(node, ast.Assert):
            self.expr(node.test, scope)
            if node.msg is not None:
                self.expr(node.msg, scope)
        elif isinstance(node, ast.Raise) and scope.context == HOST:
            self.raise_(node, scope)
        elif not isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            self.construct(node, where)
            self.descend(node, scope)

    def raise_(self, node: ast.Raise, scope: Scope) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if node.cause is not None or not (isinstance(exc, ast.Name) and exc.id in g.EXCEPTIONS):
            self.refuse(node, f"raise only {', '.join(sorted(g.EXCEPTIONS))} (with a message)")
        elif isinstance(node.exc, ast.Call):
            self.arguments_of(node.exc, scope)

    def target(self, node: ast.expr, *, tuples: bool = True) -> None:
        if isinstance(node, ast.Name):
            self.binds(node, node.id)
        elif isinstance(node, (ast.Tuple, ast.List)) and tuples:
            for element in node.elts:
                self.target(element.value if isinstance(element, ast.Starred) else element)
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            self.refuse(node, "assignment to an attribute or a subscript is not allowed (ks_kernel keeps no state; "
                              "outputs are written by @triton.jit kernels)")
        else:
            self.construct(node, "as an assignment target")

    def binds(self, node: ast.AST, name: str) -> None:
        if name.startswith("__"):
            self.refuse(node, f"the name {name!r} is not allowed")
        elif name in self.modules or name in self.objects or name in self.jit:
            self.refuse(node, f"the name {name!r} is already an import or a @triton.jit function")

    # Expressions
    def expr(self, node: ast.expr, scope: Scope, *, lambdas: bool = False) -> None:
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, ast.Name):
            self.name(node, scope)
        elif isinstance(node, ast.Attribute):
            self.attribute(node, scope)
        elif isinstance(node, ast.Call):
            self.call(node, scope)
        elif isinstance(node, ast.Lambda) and lambdas:
            self.lambda_(node, scope)
        elif isinstance(node, ast.Starred) and scope.context == HOST:  # (*x.shape[:-1], n)
            self.expr(node.value, scope)
        elif isinstance(node, ast.List) and scope.context == CONSTANT:  # list.sort is a jit body's tensor method
            self.refuse(node, "a module-level constant may not be a list: use a tuple (ks_kernel keeps no state)")
        elif isinstance(node, ast.Dict) and scope.context != JIT and None not in node.keys:
            for child in [*node.keys, *node.values]:
                self.expr(child, scope)  # type: ignore[arg-type]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Subscript, ast.Slice, ast.BinOp, ast.UnaryOp, ast.BoolOp,
                               ast.Compare, ast.IfExp, ast.JoinedStr, ast.FormattedValue)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, scope)
        else:
            self.construct(node, "here" if scope.context != CONSTANT else "in a module-level constant")
            self.descend(node, scope)

    def descend(self, node: ast.AST, scope: Scope) -> None:
        """What a refused construct holds is checked too, so that one answer names every problem."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, scope)
            elif isinstance(child, ast.stmt):
                self.statement(child, scope)
            else:
                self.descend(child, scope)

    def name(self, node: ast.Name, scope: Scope, *, called: bool = False) -> None:
        name = node.id
        if not isinstance(node.ctx, ast.Load):  # bound by a refused construct (a comprehension, del)
            self.binds(node, name)
        elif name.startswith("__"):
            self.refuse(node, f"the name {name!r} is not allowed")
        elif name in scope.names or name in self.constants or name in self.objects:
            return
        elif name in self.modules:
            self.refuse(node, f"the module {name!r} used as a value: use its attributes only (e.g. tl.load)")
        elif name in self.jit:
            if scope.context != JIT:
                self.refuse(node, f"launch the @triton.jit function {name} as {name}[grid](...)")
        elif name in self.helpers:
            if not called or scope.context != HOST:
                self.refuse(node, f"the function {name} may only be called, from ks_kernel or a helper")
        elif name in g.EXCEPTIONS and called:
            self.refuse(node, "an exception may only be raised (raise ValueError('...'))")
        elif name in g.BUILTIN_NAMES:
            allowed = {HOST: g.HOST_BUILTINS, JIT: g.JIT_BUILTINS, CONSTANT: g.CONSTANT_BUILTINS}[scope.context]
            if not (called and name in allowed):
                self.refuse(node, f"the builtin {name!r} is not available here (builtins that may be called: "
                                  f"{', '.join(sorted(allowed))})")
        elif name in g.RUNTIME_NAMES:
            self.refuse(node, f"the name {name!r} is defined nowhere in kernel.py: a kernel may not use what the "
                              "runtime puts in its globals (the triton interpreter's np, inspect...)")
        elif name not in self.refused:
            self.refuse(node, f"the name {name!r} is defined nowhere in kernel.py", forbidden=False)

    def attribute(self, node: ast.Attribute, scope: Scope) -> None:
        module = self.module_of(node.value)
        if module is not None:
            found = g.member(module, node.attr)
            if found.why:
                self.refuse(node, found.why)
            elif found.module:
                self.refuse(node, f"the module {found.path!r} used as a value: use its attributes only")
            elif module == "torch" and scope.context == JIT:
                self.refuse(node, "torch is not available inside a @triton.jit function: use triton.language")
            return
        allowed = g.JIT_ATTRIBUTES if scope.context == JIT else g.HOST_ATTRIBUTES
        if node.attr not in allowed or scope.context == CONSTANT:
            what = "in a @triton.jit function" if scope.context == JIT else "on tensors, dtypes, devices and dicts"
            self.refuse(node, f"attribute {node.attr!r} is not allowed (allowed {what}: {', '.join(sorted(allowed))})"
                        if scope.context != CONSTANT else f"attribute {node.attr!r} in a module-level constant")
        self.expr(node.value, scope)

    def call(self, node: ast.Call, scope: Scope) -> None:
        func = node.func
        if scope.context == CONSTANT and self.dotted(func) not in g.CONSTANT_CALLS and not (
                self.dotted(func).startswith("math.") or (isinstance(func, ast.Name) and func.id in g.BUILTIN_NAMES)):
            self.refuse(node, f"the call of {_short(func)} in a module-level constant: a constant is computed from "
                              "literals (int, float, min, max, tl.constexpr, triton.cdiv, math...)")
        if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) and func.value.id in self.jit:
            if scope.context != HOST:
                self.refuse(node, "kernels are launched from ks_kernel or a helper")
            self.expr(func.slice, scope, lambdas=True)  # the grid
        elif isinstance(func, ast.Name):
            self.name(func, scope, called=True)
        elif isinstance(func, ast.Attribute):
            self.attribute(func, scope)
        else:
            self.refuse(node, f"the call of {_short(func)}: only the file's functions, the allowed builtins, "
                              "module functions, allowed methods and launches kernel[grid](...) may be called")
        self.arguments_of(node, scope)

    def arguments_of(self, node: ast.Call, scope: Scope) -> None:
        for arg in node.args:
            starred = isinstance(arg, ast.Starred) and scope.context == HOST
            self.expr(arg.value if starred else arg, scope)  # type: ignore[attr-defined]
        for keyword in node.keywords:
            if keyword.arg is None and scope.context != HOST:
                self.refuse(keyword.value, "** arguments are not allowed here")
            self.expr(keyword.value, scope)

    def lambda_(self, node: ast.Lambda, scope: Scope) -> None:
        args = node.args
        if len(args.args) != 1 or args.posonlyargs or args.kwonlyargs or args.vararg or args.kwarg or args.defaults:
            self.refuse(node, "a grid or heuristic lambda takes exactly one parameter (lambda meta: ...)")
        inner = Scope(HOST, scope.names | {a.arg for a in args.args})
        self.expr(node.body, inner)

    def annotation(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant) or (isinstance(node, ast.Name) and node.id in g.ANNOTATION_NAMES):
            return
        if isinstance(node, ast.Attribute) and self.module_of(node.value) is not None:
            self.attribute(node, Scope(HOST))
        elif isinstance(node, (ast.Subscript, ast.Tuple, ast.BinOp)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.annotation(child)
        else:
            self.refuse(node, "an annotation may name only types (int, float, torch.Tensor, tl.constexpr...)")

    def module_of(self, node: ast.expr) -> str | None:
        """The module `node` stands for (tl, tl.math, triton.language...), None when it is a value."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            parent = self.module_of(node.value)
            if parent is not None:
                found = g.member(parent, node.attr)
                return found.path if found.module else None
        return None

    def dotted(self, node: ast.expr) -> str:
        """'triton.jit' for triton.jit or for jit imported from triton; '' for anything else."""
        if isinstance(node, ast.Name):
            return self.objects.get(node.id, "")
        if isinstance(node, ast.Attribute):
            module = self.module_of(node.value)
            return f"{module}.{node.attr}" if module else ""
        return ""


def bound_names(target: ast.expr) -> list[str]:
    """The names a module-level assignment binds ([] when it assigns to anything but names)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]  # type: ignore[attr-defined]
    return []


def bound_anywhere(node: ast.AST) -> set[str]:
    """Every name `node` binds: assigned, a loop's, a parameter's (a lambda's too), an exception's."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
            names.add(sub.id)
        elif isinstance(sub, ast.arg):
            names.add(sub.arg)
        elif isinstance(sub, ast.ExceptHandler) and sub.name:
            names.add(sub.name)
    return names


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def is_literal(node: ast.expr) -> bool:
    """A number, string, bool or None (negated or in a tuple): values that carry no object of the runtime."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return is_literal(node.operand)
    if isinstance(node, ast.Tuple):
        return all(is_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant)
