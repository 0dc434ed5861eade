"""Reading tree-sitter-cpp nodes: declared names, qualified names, constant conditions, pragmas.

Why tree-sitter and not libclang: the audit reads code that may not compile and whose headers are absent
(Ascend's kernel_operator.h is not on this host, and the headers of a cpu candidate are not read either), so
it needs a parser that tolerates errors and needs no headers: tree-sitter parses what it can and marks the
rest as ERROR nodes, where libclang would need the headers to build an AST at all. Its wheels are small and
self-contained (no LLVM installation).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache

import tree_sitter_cpp
from tree_sitter import Language, Node, Parser

from kernelsage.graph.audit.cues import Name, pragma_words

NAME_NODES = frozenset({"identifier", "field_identifier", "type_identifier", "namespace_identifier"})
DECLARED_NODES = NAME_NODES | {"qualified_identifier", "destructor_name", "operator_name"}
SKIPPED_NODES = frozenset({
    "string_literal", "raw_string_literal", "char_literal", "concatenated_string", "number_literal", "comment",
    "primitive_type", "sized_type_specifier", "template_parameter_list", "preproc_def", "preproc_function_def",
    "preproc_include", "statement_identifier", "true", "false", "this", "nullptr", "user_defined_literal",
})
DECLARING_NODES = frozenset({
    "declaration", "field_declaration", "parameter_declaration", "optional_parameter_declaration",
    "variadic_parameter_declaration", "for_range_loop", "init_declarator", "type_definition", "condition_clause",
})
PREPROC_BRANCHES = frozenset({"preproc_if", "preproc_ifdef", "preproc_elif", "preproc_else", "preproc_elifdef"})


@cache
def parser_language() -> Language:
    return Language(tree_sitter_cpp.language())


def parse(data: bytes) -> Node:
    """The syntax tree of C++ source (tree-sitter: never fails; what it cannot read becomes ERROR nodes)."""
    return Parser(parser_language()).parse(data).root_node


def text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def qualified(spelling: str) -> Name:
    """`AscendC::LocalTensor<float>` -> ("AscendC", "LocalTensor"): template arguments and spaces dropped."""
    previous = None
    while previous != spelling:
        previous, spelling = spelling, re.sub(r"<[^<>]*>", "", spelling)
    return tuple(part for part in re.sub(r"\s+", "", spelling).split("::") if part)


def declared_names(node: Node) -> list[Node]:
    """The name nodes a declaring node introduces (its declarators', followed down to the identifier)."""
    found = []
    for declarator in node.children_by_field_name("declarator"):
        found.extend(_declarator_names(declarator))
    return found


def _declarator_names(node: Node | None) -> list[Node]:
    while node is not None:
        if node.type in DECLARED_NODES:
            return [node]
        if node.type == "structured_binding_declarator":
            return [c for c in node.named_children if c.type == "identifier"]
        inner = node.child_by_field_name("declarator")
        if inner is None and node.type in ("reference_declarator", "pointer_declarator", "attributed_declarator",
                                           "parenthesized_declarator"):
            inner = next((c for c in reversed(node.named_children)
                          if c.type not in ("type_qualifier", "attribute_declaration", "ms_pointer_modifier")), None)
        node = inner
    return []


def last_name(node: Node) -> str:
    """The unqualified name a declarator's name node spells (`KernelRelu<T>::Process` -> Process)."""
    name = qualified(text(node))
    return name[-1] if name else ""


def constant(node: Node | None, known: Mapping[str, bool] | None = None) -> bool | None:
    """The truth of a condition that is a literal (`0`, `false`, `(1)`, `!0`) or a name `known` holds (a
    constant initialised with one), else None."""
    if node is None:
        return None
    if node.type in ("condition_clause", "parenthesized_expression"):
        inner = node.child_by_field_name("value") or (node.named_children[0] if node.named_children else None)
        return constant(inner, known)
    if node.type == "identifier":
        return (known or {}).get(text(node))
    if node.type in ("true", "false"):
        return node.type == "true"
    if node.type == "number_literal":
        digits = re.sub(r"['uUlL]", "", text(node))
        try:
            return int(digits, 0) != 0
        except ValueError:
            return None
    if node.type == "unary_expression" and text(node).startswith("!"):
        value = constant(node.child_by_field_name("argument"), known)
        return None if value is None else not value
    return None


def literal_constants(root: Node) -> dict[str, bool]:
    """The truth of each `const`/`constexpr` name initialised with a literal and declared once (`constexpr bool
    kUsePad = false;`): a branch on it is as dead as one on the literal."""
    found: dict[str, bool | None] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.named_children)
        if node.type != "declaration" or not any(c.type == "type_qualifier" and text(c) in ("const", "constexpr")
                                                   for c in node.children):
            continue
        for declarator in node.children_by_field_name("declarator"):
            name, value = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("value")
            if declarator.type == "init_declarator" and name is not None and name.type == "identifier":
                truth = constant(value) if value is not None and value.type != "identifier" else None
                found[text(name)] = truth if text(name) not in found else None
    return {name: truth for name, truth in found.items() if truth is not None}


def pragma(node: Node) -> tuple[str, ...] | None:
    """The words of a `#pragma` line, or None when `node` is not one."""
    if node.type != "preproc_call":
        return None
    directive = node.child_by_field_name("directive")
    if directive is None or text(directive).replace(" ", "") != "#pragma":
        return None
    argument = node.child_by_field_name("argument")
    return pragma_words(text(argument)) if argument is not None else ()


def branches(nodes: list[Node], dead: list[tuple[int, int]]) -> list[Node]:
    """`nodes` with preprocessor conditionals opened (only where the preprocessor could not run): the
    branches of `#if 0` are dropped (their ranges added to `dead`), every other branch is kept."""
    kept: list[Node] = []
    for node in nodes:
        if node.type not in PREPROC_BRANCHES:
            kept.append(node)
            continue
        condition = node.child_by_field_name("condition")
        alternative = node.child_by_field_name("alternative")
        body = [c for c in node.named_children
                if c not in (condition, alternative, node.child_by_field_name("name")) and c.type != "comment"]
        if constant(condition) is False:
            dead.extend((c.start_byte, c.end_byte) for c in body)
        else:
            kept.extend(branches(body, dead))
        if alternative is not None:
            kept.extend(branches([alternative], dead))
    return kept
