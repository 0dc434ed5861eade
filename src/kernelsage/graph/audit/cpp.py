"""C and C++ (cpu candidates and Ascend C) as the compiler reads them: preprocessed, parsed, reachable code.

The source goes through the host preprocessor (`preprocess`), then tree-sitter-cpp. Evidence is what live
code *uses*: names called or read (identifiers in expressions, qualified names, fields), types used, type
qualifiers (`__restrict__`), and pragmas that apply (a `#pragma` followed by a statement in live code, or at
file scope before a live function). Declarator names are never uses.

What is live (`liveness`): the entry points are the ABI's functions (`ks_kernel` for cpu, `ks_launch` for
Ascend direct launch); a file that defines neither (an msopgen kernel file) starts from every function
visible outside it (not static, inline or in an anonymous namespace), `extern "C"` functions and `__global__`
kernels. From there a function, method, class, global or local variable is live when a live unit uses its
name (constructors, destructors and operators with their class). A local variable nobody reads, an
assignment to one, an `if (0)`/`if constexpr (false)` branch and statements after a `return` in the same
block contribute nothing. Names resolve through `using namespace X`, `using X::name` and namespace aliases.

When the preprocessor fails, the prepared text (comments blanked, includes removed) is parsed as it is: `#if
0` branches are dropped, other conditional branches are all kept, macros are not expanded (a macro's name is
the use) and `_Pragma` is not seen; the reading's note says so.
"""

from __future__ import annotations

from tree_sitter import Node

from kernelsage.graph.audit.cpp_syntax import (
    DECLARING_NODES,
    NAME_NODES,
    PREPROC_BRANCHES,
    SKIPPED_NODES,
    branches,
    constant,
    declared_names,
    last_name,
    literal_constants,
    parse,
    pragma,
    qualified,
    text,
)
from kernelsage.graph.audit.cues import IDENT, MAX_PRAGMA_WORDS, PRAGMA, Name, cue_name, normal, pragma_words
from kernelsage.graph.audit.liveness import Reading, Unit, cut, live_units
from kernelsage.graph.audit.preprocess import Preprocessor, preprocess
from kernelsage.tools.cpu.abi import ENTRY_POINT

ENTRY_POINTS = frozenset({ENTRY_POINT, "ks_launch"})  # the cpu ABI's and the Ascend direct launch's
CLASSES = frozenset({"class_specifier", "struct_specifier", "union_specifier"})
EXITS = frozenset({"return_statement", "break_statement", "continue_statement", "goto_statement", "throw_statement"})
LABELS = frozenset({"labeled_statement", "case_statement"})
LOCAL_SCOPES = frozenset({"compound_statement", "case_statement"})
IGNORED_AT_FILE_SCOPE = frozenset({"access_specifier", "comment", "static_assert_declaration", "friend_declaration"})


def read_cpp(source: str, preprocessor: Preprocessor) -> Reading:
    """The live uses, pragmas and text of C/C++ `source`, read through `preprocessor`."""
    result = preprocess(source, preprocessor)
    data = result.text.encode("utf-8")
    note = f"{result.failure}: read without the preprocessor" if result.failure else ""
    try:
        reader = _Reader()
        root = parse(data)
        reader.collect_locals(root)
        reader.constants = literal_constants(root)
        reader.top(root.named_children)
        return reader.reading(data, note)
    except RecursionError:  # nesting deeper than this reader follows: every name of the text counts
        names = {cue_name(t) for t in IDENT.findall(PRAGMA.sub(" ", result.text))}
        pragmas = tuple(pragma_words(m.group(1))[:MAX_PRAGMA_WORDS] for m in PRAGMA.finditer(result.text))
        return Reading(uses=frozenset(names | {(n[-1],) for n in names}), pragmas=pragmas,
                       live_text=normal(result.text),
                       note="; ".join(filter(None, [note, "nested too deeply: every name of the text counted"])))


class _Reader:
    """One pass over a translation unit: its units, the dead ranges found on the way, the using-names."""

    def __init__(self) -> None:
        self.units: list[Unit] = []
        self.skip: set[int] = set()  # ids of declarator names: never uses
        self.declared: set[str] = set()  # the names this file declares
        self.constants: dict[str, bool] = {}  # `constexpr bool kPad = false;`: names a branch may test
        self.dead: list[tuple[int, int]] = []
        self.locals: set[str] = set()  # names declared inside functions
        self.namespaces: set[Name] = set()  # `using namespace X`
        self.heads: dict[str, Name] = {}  # `using X::name`, `namespace a = X`: a leading name and what it names
        self.functions: list[tuple[int, bool, bool]] = []  # (unit, visible outside the file, entry point)
        self.file_pragmas: list[tuple[tuple[str, ...], int]] = []  # (words, first unit after it)

    # ---- units
    def declare(self, names: list[Node]) -> None:
        self.skip.update(n.id for n in names)
        self.declared.update(last_name(n) for n in names)

    def unit(self, node: Node, *, defines: frozenset[str] = frozenset(), root: bool = False,
             parent: int | None = None) -> int:
        self.units.append(Unit(defines=defines, root=root, parent=parent, spans=[(node.start_byte, node.end_byte)]))
        return len(self.units) - 1

    def reading(self, data: bytes, note: str) -> Reading:
        entries = [index for index, _, entry in self.functions if entry]
        for index, visible, _ in self.functions:
            self.units[index].root |= index in entries if entries else visible  # (free operators are roots already)
        live = live_units(self.units)
        uses: set[Name] = set()
        pragmas = [p for i in sorted(live) for p in self.units[i].pragmas]
        for index in live:
            uses.update(self.units[index].uses)
        function_units = [index for index, _, _ in self.functions]
        pragmas += [words for words, first in self.file_pragmas if any(i >= first and i in live for i in function_units)]
        dead = self.dead + [span for i, unit in enumerate(self.units) if i not in live for span in unit.spans]
        live_text = normal(cut(data, dead).decode("utf-8", errors="replace"))
        return Reading(uses=frozenset(self.resolved(uses)), pragmas=tuple(pragmas), live_text=live_text,
                       declared=frozenset(self.declared), note=note)

    def resolved(self, uses: set[Name]) -> set[Name]:
        """Each use, and what it names through the file's using-directives, using-declarations and aliases."""
        found = set(uses)
        for name in filter(None, uses):
            if name[0] in self.heads:
                found.add(self.heads[name[0]] + name[1:])
            found.update(space + name for space in self.namespaces)
        return found

    def collect_locals(self, root: Node) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            if node.type == "declaration" and node.parent is not None and node.parent.type in LOCAL_SCOPES:
                self.locals.update(last_name(n) for n in declared_names(node))
            stack.extend(node.named_children)

    # ---- file scope
    def top(self, nodes: list[Node], *, visible: bool = True, cls: str | None = None, parent: int | None = None,
            extern_c: bool = False) -> None:
        for node in branches(list(nodes), self.dead):
            kind = node.type
            words = pragma(node)
            if words is not None:
                self.file_pragmas.append((words, len(self.units)))
            elif kind == "function_definition":
                self.function(node, visible=visible or extern_c, cls=cls, parent=parent, extern_c=extern_c)
            elif kind == "template_declaration":
                inner = [c for c in node.named_children if c.type != "template_parameter_list"]
                self.top(inner, visible=visible, cls=cls, parent=parent, extern_c=extern_c)
            elif kind == "linkage_specification":
                body = node.child_by_field_name("body")
                inner = [] if body is None else body.named_children if body.type == "declaration_list" else [body]
                self.top(inner, visible=visible, cls=cls, parent=parent, extern_c=True)
            elif kind == "namespace_definition":
                body = node.child_by_field_name("body")
                anonymous = node.child_by_field_name("name") is None
                self.top(body.named_children if body else [], visible=visible and not anonymous, parent=parent)
            elif kind in CLASSES:
                self.klass(node, parent)
            elif kind in ("declaration", "field_declaration", "type_definition", "alias_declaration", "enum_specifier"):
                self.named(node, parent)
            elif kind in ("using_declaration", "namespace_alias_definition"):
                self.using(node)
            elif kind in ("ERROR", "declaration_list", "field_declaration_list"):
                self.top(node.named_children, visible=visible, cls=cls, parent=parent, extern_c=extern_c)
            elif kind not in IGNORED_AT_FILE_SCOPE and not kind.startswith("preproc_"):
                self.walk(node, self.unit(node, root=True, parent=parent))  # file-scope code (a macro's call)

    def function(self, node: Node, *, visible: bool, cls: str | None, parent: int | None, extern_c: bool) -> None:
        names = declared_names(node)
        spelled = qualified(text(names[0])) if names else ()
        name = spelled[-1] if spelled else ""
        owner = cls or (spelled[-2] if len(spelled) >= 2 else None)
        special = bool(names) and (names[0].type in ("destructor_name", "operator_name") or name.startswith(("~", "operator")))
        if owner and (special or name == owner):
            defines, root = frozenset({owner}), False  # constructors, destructors, operators: with their class
        else:
            defines, root = frozenset({name}), special  # a free operator is called by no name: kept
        storage = {text(c) for c in node.children if c.type == "storage_class_specifier"}
        kernel = any("__global__" in text(c) for c in node.children if c.type in ("type_identifier", "ERROR"))
        free = cls is None and len(spelled) == 1
        index = self.unit(node, defines=defines, root=root, parent=parent)
        self.functions.append((index, (free and visible and not storage & {"static", "inline"}) or
                               (free and extern_c) or kernel, free and name in ENTRY_POINTS))
        self.declare(names)
        body = node.child_by_field_name("body")
        for child in node.children:
            if child == body:
                self.block(child, index)
            else:
                self.walk(child, index)

    def klass(self, node: Node, parent: int | None) -> None:
        name_node = node.child_by_field_name("name")
        name = last_name(name_node) if name_node is not None else ""
        index = self.unit(node, defines=frozenset({name}) if name else frozenset(), root=not name, parent=parent)
        for child in node.children:
            if child.type == "field_declaration_list":
                self.top(child.named_children, visible=False, cls=name, parent=index)
            elif child != name_node:
                self.walk(child, index)

    def named(self, node: Node, parent: int | None) -> None:
        """A declaration at file or class scope: a unit live when one of the names it declares is used."""
        kind = node.child_by_field_name("type")
        if kind is not None and kind.type in CLASSES and kind.child_by_field_name("body") is not None:
            self.klass(kind, parent)
            node_parts = [c for c in node.children if c != kind]
        else:
            node_parts = list(node.children)
        names = declared_names(node)
        defines = {last_name(n) for n in names}
        name_node = node.child_by_field_name("name")
        if name_node is not None:  # an enum, an alias
            defines.add(last_name(name_node))
            self.declare([name_node])
        if node.type == "enum_specifier":
            defines.update(text(c.child_by_field_name("name")) for c in _enumerators(node))
        if not defines:
            return
        self.declare(names)
        index = self.unit(node, defines=frozenset(defines), parent=parent)
        for part in node_parts:
            self.walk(part, index)

    def using(self, node: Node) -> None:
        target = node.named_children[-1] if node.named_children else None
        if target is None:
            return
        if node.type == "namespace_alias_definition":
            alias = node.child_by_field_name("name")
            if alias is not None and alias != target:
                self.heads[text(alias)] = qualified(text(target))
        elif any(c.type == "namespace" for c in node.children):
            self.namespaces.add(qualified(text(target)))
        elif (name := qualified(text(target))) and len(name) > 1:
            self.heads[name[-1]] = name

    # ---- statements
    def block(self, node: Node, unit: int) -> None:
        """A block's statements: pragmas apply to the statement after them; nothing after a return runs."""
        pending: list[tuple[str, ...]] = []
        exited = False
        for child in branches(list(node.named_children), self.dead):
            if child.type == "comment":
                continue
            if exited and child.type not in LABELS:
                self.dead.append((child.start_byte, child.end_byte))
                continue
            words = pragma(child)
            if words is not None:
                pending.append(words)
                continue
            if child.type.startswith("preproc_"):
                continue
            self.units[unit].pragmas.extend(pending)
            pending = []
            self.statement(child, unit)
            exited = child.type in EXITS or (child.type == "expression_statement" and child.named_children != []
                                              and child.named_children[0].type == "throw_expression")

    def statement(self, node: Node, unit: int) -> None:
        kind = node.type
        if kind == "compound_statement" or kind == "case_statement":
            self.block(node, unit)
        elif kind == "declaration":
            self.local(node, unit)
        elif kind == "expression_statement" and _assigned_local(node, self.locals):
            assignment = node.named_children[0]
            left = assignment.child_by_field_name("left")
            assert left is not None
            self.skip.add(left.id)
            self.walk(assignment, self.unit(node, defines=frozenset({text(left)}), parent=unit))
        elif kind in ("if_statement", "while_statement"):
            condition = node.child_by_field_name("condition")
            value = constant(condition, self.constants)
            if condition is not None:
                self.walk(condition, unit)
            parts = [(node.child_by_field_name("consequence") or node.child_by_field_name("body"), value is False),
                     (node.child_by_field_name("alternative"), value is True and kind == "if_statement")]
            for part, dead in parts:
                if part is not None and dead:
                    self.dead.append((part.start_byte, part.end_byte))
                elif part is not None:
                    for inner in (part.named_children if part.type == "else_clause" else [part]):
                        self.statement(inner, unit)
        elif kind.endswith("_statement") or kind in ("for_range_loop", "catch_clause", "else_clause"):
            if kind in DECLARING_NODES:
                self.declare(declared_names(node))
            for child in node.children:
                if child.is_named and (child.type.endswith("_statement") or child.type == "declaration"):
                    self.statement(child, unit)
                else:
                    self.walk(child, unit)
        else:
            self.walk(node, unit)

    def local(self, node: Node, unit: int) -> None:
        """A local declaration: its own unit (live when a variable it declares is read), unless it declares a
        reference, whose writes are another object's."""
        names = declared_names(node)
        self.declare(names)
        references = any(c.type == "reference_declarator" or (c.type == "init_declarator" and
                         (c.child_by_field_name("declarator") or c).type == "reference_declarator")
                         for c in node.children_by_field_name("declarator"))
        if references or not names:
            self.walk(node, unit)
        else:
            self.walk(node, self.unit(node, defines=frozenset(last_name(n) for n in names), parent=unit))

    # ---- expressions and types
    def walk(self, node: Node, unit: int) -> None:
        """The names `node` uses, into `unit` (iterative: long expressions nest deep)."""
        uses = self.units[unit].uses
        stack = [node]
        while stack:
            current = stack.pop()
            kind = current.type
            if kind in SKIPPED_NODES or current.id in self.skip:
                continue
            if kind in DECLARING_NODES:
                self.declare(declared_names(current))
            if kind in NAME_NODES or kind == "type_qualifier":
                uses.add((text(current),))
            elif kind in ("qualified_identifier", "qualified_type_identifier"):
                uses.add(qualified(text(current)))
                stack.extend(_template_arguments(current))
            elif kind == "compound_statement":
                self.block(current, unit)
            elif kind in ("using_declaration", "namespace_alias_definition"):
                self.using(current)
            elif kind not in PREPROC_BRANCHES and kind != "preproc_call":
                stack.extend(reversed(current.children))


def _assigned_local(node: Node, local_names: set[str]) -> bool:
    """`x = ...;` or `x += ...;` where x is a local variable's name."""
    expression = node.named_children[0] if node.named_children else None
    if expression is None or expression.type != "assignment_expression":
        return False
    left = expression.child_by_field_name("left")
    return left is not None and left.type == "identifier" and text(left) in local_names


def _template_arguments(node: Node) -> list[Node]:
    found, stack = [], list(node.children)
    while stack:
        current = stack.pop()
        if current.type == "template_argument_list":
            found.append(current)
        else:
            stack.extend(current.children)
    return found


def _enumerators(node: Node) -> list[Node]:
    body = node.child_by_field_name("body")
    return [c for c in body.named_children if c.type == "enumerator"] if body is not None else []
