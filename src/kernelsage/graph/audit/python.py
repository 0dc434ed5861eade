"""Python (Triton) candidates as the interpreter reads them: `ast`, imports resolved, reachable code only.

Names resolve through the file's imports: `tl.dot`, `triton.language.dot` and `dot` after `from
triton.language import dot` are all `triton.language.dot`. Uses are names read (`Name` loads, attribute
chains, keyword arguments such as `num_warps=8`, decorators, annotations); names assigned, parameters and the
text of comments and strings are not.

What is live (`liveness`): the entry point `ks_kernel` (or, in a file without one, every module-level
function), module-level statements other than definitions and assignments, and every function, class or
variable whose name a live unit uses. An assignment to a name nobody reads, an `if False:`/`if 0:` branch
(`while False:` too), a docstring and statements after a `return` in the same block contribute nothing.
Source the parser rejects is read as its names outside comments and strings, and the reading says so.
"""

from __future__ import annotations

import ast
import re

from kernelsage.graph.audit.cues import IDENT, Name, cue_name, normal
from kernelsage.graph.audit.liveness import Reading, Unit, cut, live_units

ENTRY_POINT = "ks_kernel"  # the triton backend's (tools/triton/prompt_contract.md)
EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
COMMENTS_AND_STRINGS = re.compile(r'("""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*)')


def read_python(source: str) -> Reading:
    """The live uses and text of Python `source`."""
    try:
        tree = ast.parse(source)
        reader = _Reader(source.encode("utf-8"))
        reader.imports(tree)
        reader.constants = _literal_constants(tree)
        root = reader.unit(tree, root=True)
        reader.body(tree.body, root, module=True)
        return reader.reading(_declared(tree))
    except (SyntaxError, ValueError) as error:
        why = error.msg if isinstance(error, SyntaxError) else str(error)
    except (RecursionError, MemoryError):  # nesting deeper than the parser or this reader can follow
        why = "nested too deeply"
    plain = COMMENTS_AND_STRINGS.sub(lambda m: "" if m.group(0).startswith("#") else '""', source)
    names = {cue_name(t) for t in IDENT.findall(plain)}
    return Reading(uses=frozenset(names | {(n[-1],) for n in names}), live_text=normal(plain),
                   note=f"not Python the parser reads ({why}): every name outside comments counted")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.line_starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
        self.units: list[Unit] = []
        self.dead: list[tuple[int, int]] = []
        self.aliases: dict[str, Name] = {}
        self.functions: list[tuple[int, str]] = []  # module-level functions: (unit, name)
        self.constants: dict[str, bool] = {}  # names bound once to a literal: conditions that never change

    def span(self, node: ast.AST) -> tuple[int, int]:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
        start = self.line_starts[first - 1] + (node.col_offset if first == node.lineno else 0)  # type: ignore[attr-defined]
        end = self.line_starts[(node.end_lineno or node.lineno) - 1] + (node.end_col_offset or 0)  # type: ignore[attr-defined]
        return start, end

    def unit(self, node: ast.AST, *, defines: frozenset[str] = frozenset(), root: bool = False,
             parent: int | None = None) -> int:
        spans = [self.span(node)] if hasattr(node, "lineno") else []
        self.units.append(Unit(defines=defines, root=root, parent=parent, spans=spans))
        return len(self.units) - 1

    def reading(self, declared: frozenset[str]) -> Reading:
        if not any(name == ENTRY_POINT for _, name in self.functions):
            for index, _ in self.functions:
                self.units[index].root = True
        live = live_units(self.units)
        uses = {name for index in live for name in self.units[index].uses}
        dead = self.dead + [span for i, unit in enumerate(self.units) if i not in live for span in unit.spans]
        text = cut(self.data, dead).decode("utf-8", errors="replace")
        text = COMMENTS_AND_STRINGS.sub(lambda m: "" if m.group(0).startswith("#") else m.group(0), text)
        return Reading(uses=frozenset(uses), live_text=normal(text), declared=declared)

    def imports(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = tuple(alias.name.split("."))
                    self.aliases[alias.asname or parts[0]] = parts if alias.asname else parts[:1]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = (*node.module.split("."), alias.name)

    # ---- statements
    def body(self, statements: list[ast.stmt], unit: int, *, module: bool = False) -> None:
        exited = False
        for statement in statements:
            if exited:
                self.dead.append(self.span(statement))
                continue
            self.statement(statement, unit, module=module)
            exited = isinstance(statement, EXITS)

    def statement(self, node: ast.stmt, unit: int, *, module: bool) -> None:
        if isinstance(node, DEFINITIONS):
            index = self.unit(node, defines=frozenset({node.name}), parent=unit)
            if module and not isinstance(node, ast.ClassDef):
                self.functions.append((index, node.name))
                self.units[index].root = node.name == ENTRY_POINT
            for field in ("decorator_list", "args", "returns", "bases", "keywords"):
                self.expression(getattr(node, field, None), index)
            self.body(node.body, index)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and _assigned_names(node):
            index = self.unit(node, defines=_assigned_names(node), parent=unit)
            self.expression([node.value, getattr(node, "annotation", None)], index)
        elif isinstance(node, (ast.If, ast.While)) and _constant(node.test, self.constants) is not None:
            self.expression(node.test, unit)
            truth = _constant(node.test, self.constants)
            for part, dead in ((node.body, not truth), (node.orelse, truth)):
                if dead:
                    self.dead.extend(self.span(s) for s in part)
                else:
                    self.body(part, unit)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            self.dead.append(self.span(node))  # a docstring or a bare literal
        else:
            for field, value in ast.iter_fields(node):
                if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                    self.body(value, unit)
                elif field == "handlers":
                    for handler in value:
                        self.expression(handler.type, unit)
                        self.body(handler.body, unit)
                else:
                    self.expression(value, unit)

    # ---- expressions
    def expression(self, node: object, unit: int) -> None:
        uses = self.units[unit].uses
        stack = list(node) if isinstance(node, list) else [node]
        while stack:
            current = stack.pop()
            if isinstance(current, list):
                stack.extend(current)
            elif isinstance(current, ast.Attribute):
                chain = _dotted(current)
                if chain is None:
                    uses.add((current.attr,))
                    stack.append(current.value)
                else:
                    uses.update({self.aliases.get(chain[0], chain[:1]) + chain[1:], chain[:1]})
            elif isinstance(current, ast.Name):
                if not isinstance(current.ctx, ast.Store):
                    uses.update({self.aliases.get(current.id, (current.id,)), (current.id,)})
            elif isinstance(current, ast.keyword):
                if current.arg:
                    uses.add((current.arg,))
                stack.append(current.value)
            elif isinstance(current, ast.arg):
                stack.append(current.annotation)
            elif isinstance(current, ast.AST) and not isinstance(current, ast.Constant):
                stack.extend(ast.iter_child_nodes(current))


def _declared(tree: ast.Module) -> frozenset[str]:
    """The names the file binds: functions, classes, parameters, assignment targets."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, DEFINITIONS):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return frozenset(names)


def _dotted(node: ast.expr) -> Name | None:
    """`a.b.c` as ("a", "b", "c"), or None when the chain does not start at a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id, *reversed(parts)) if isinstance(node, ast.Name) else None


def _assigned_names(node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> frozenset[str]:
    """The names an assignment binds when it binds only names (an assignment to `y[i]` or `o.x` has effects)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names: set[str] = set()
    for target in targets:
        for part in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            if not isinstance(part, ast.Name):
                return frozenset()
            names.add(part.id)
    return frozenset(names)


def _constant(test: ast.expr, known: dict[str, bool]) -> bool | None:
    """The truth of a literal condition (`False`, `0`, `None`, `not True`) or of a name `known` holds, else None."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Name):
        return known.get(test.id)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _constant(test.operand, known)
        return None if inner is None else not inner
    return None


def _literal_constants(tree: ast.Module) -> dict[str, bool]:
    """The truth of each name bound once in the file, to a literal (`USE_DOT: tl.constexpr = False`)."""
    bound: dict[str, int] = {}
    values: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound[node.id] = bound.get(node.id, 0) + 1
        elif isinstance(node, ast.arg):
            bound[node.arg] = bound.get(node.arg, 0) + 2  # a parameter is never a constant
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            values.update({t.id: bool(node.value.value) for t in targets if isinstance(t, ast.Name)})
    return {name: truth for name, truth in values.items() if bound.get(name) == 1}
