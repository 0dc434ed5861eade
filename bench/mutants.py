"""Mutants of a reference kernel, by class: a pure, deterministic, line-wise token generator (no I/O, no torch).

Used by bench/mutation.py. Each rule reads one source line with its comments and string literals blanked out
(so `"eps"` or a comment is never mutated), proposes replacements of spans of that line, and names its class:

    constants   float literals scaled (0 -> 0.25, |x| < 0.01 -> x * 100, else x * 0.5); float attributes scaled
                (eps-like x 100, others x 0.5)
    boundaries  loop and mask bounds (< -> <=: an overrun by one where it bounds a loop or mask, n -> n - 1),
                loop starts + 1, block tails (cdiv -> //,
                next_power_of_2(n) -> next_power_of_2(n - 1), range(a, b, s) -> range(a, b - 1, s)), offsets + 1
    axis        i * s + j -> j * s + i, one size name for another as a stride, [:, None] <-> [None, :],
                program_id(0) <-> program_id(1), tl.dot(a, b) -> tl.dot(b, a), shape[last] -> shape[0],
                unpacked shape names swapped
    dropped     one addend (with its whole product) or one factor removed from a value expression
    precision   accumulation rounded to half after every step (`x += e` ->
                `x = ks_half_to_float(ks_float_to_half((float)(x + e)))`, kernelsage_cpu.h's helpers; bfloat16
                likewise), tl.float32 -> tl.float16,
                accumulators made tl.bfloat16, input_precision "ieee" -> "tf32"
    ties        value comparisons > <-> >=, < <-> <=, index order flipped in tie breaks, NaN behaviour flipped
                (a > b -> !(a <= b)), NaN-propagating max/min replaced by comparisons, ternary max -> fmax

Address arithmetic (subscripts, pointer offsets, loads' and stores' addresses, masks, for-headers, the host
launcher) is left to the boundary and axis rules; the dropped-term rule touches only value arithmetic.
A few hand-written mutants (HAND_WRITTEN) cover what a line-wise rule cannot reach; they are marked as such.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

CLASSES = ("constants", "boundaries", "axis", "dropped", "precision", "ties")

IDENT = r"[A-Za-z_]\w*"
FLOAT = re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)([fF]?)(?![\w.])")


@dataclass(frozen=True)
class Mutant:
    """One mutant: its class and rule, where (1-based line), the line before and after, the whole source."""

    kernel: str
    cls: str
    rule: str
    line: int
    before: str
    after: str
    source: str
    column: int = 0  # 0-based, where the edit starts (tells apart two mutants of one rule on one line)
    hand_written: bool = False

    @property
    def id(self) -> str:
        return f"{self.kernel}:{self.line}:{self.column}:{self.rule}"


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str
    cls: str
    rule: str


@dataclass
class Context:
    """What the rules of one line may know about the whole file."""

    lang: str  # "cpp" or "python"
    line: str = ""  # the line itself: replacement text is copied from here, never from the blanked code
    sizes: tuple[str, ...] = ()  # names used as sizes/strides (swappable with each other)
    address: list[tuple[int, int]] = field(default_factory=list)  # spans of the line holding address arithmetic
    host: bool = False  # python: the line is in ks_kernel (the launcher), not in a jit body
    for_header: tuple[int, int] | None = None  # cpp: the span of a for (...) header
    loop_var_used: bool = False  # cpp: the for header's variable appears outside the header (it indexes)
    grid_2d: bool = False  # python: the jit bodies read program_id(1), so axes 0 and 1 can be swapped


# -- lexical helpers -----------------------------------------------------------------------------------------

def blank_line(line: str, lang: str) -> str:
    """The line with string-literal contents and comments replaced by spaces (same length, quotes kept)."""
    out, i, quote = list(line), 0, ""
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                out[i] = " "
                if i + 1 < len(line):
                    out[i + 1] = " "
                i += 2
                continue
            if ch == quote:
                quote = ""
            else:
                out[i] = " "
        elif ch in "\"'":
            quote = ch
        elif (lang == "cpp" and line.startswith("//", i)) or (lang == "python" and ch == "#"):
            return "".join(out[:i]) + " " * (len(line) - i)
        i += 1
    return "".join(out)


CLOSE = {"(": ")", "[": "]", "{": "}"}


def match_close(code: str, start: int) -> int:
    """Index just past the bracket group opening at code[start]."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] in "([{":
            depth += 1
        elif code[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def primary_end(code: str, start: int) -> int | None:
    """End of the operand starting at `start`: a cast, unary minus, name or number with calls, subscripts and
    attributes, or a bracketed group; None when no operand starts there."""
    i = start
    while i < len(code) and code[i] in "-!~":
        i += 1
    cast = re.match(r"\((?:const\s+)?(?:float|double|int64_t|int|_Float16)\)", code[i:])
    if cast:
        i += cast.end()
    if i < len(code) and code[i] == "(":
        i = match_close(code, i)
    else:
        token = re.match(r"(?:\d+\.?\d*(?:[eE][-+]?\d+)?[fF]?|\.\d+[fF]?|(?:std::|tl\.|triton\.)?" + IDENT + ")",
                         code[i:])
        if not token:
            return None
        i += token.end()
    while i < len(code):
        if code[i] in "([":
            i = match_close(code, i)
        elif code[i] == "." and re.match(r"\." + IDENT, code[i:]):
            i += re.match(r"\." + IDENT, code[i:]).end()
        else:
            break
    return i


def primary_start(code: str, end: int) -> int | None:
    """Start of the operand ending just before `end` (the mirror of primary_end for simple operands)."""
    i = end
    while True:
        if i > 0 and code[i - 1] in ")]":
            depth = 0
            j = i - 1
            while j >= 0:
                if code[j] in ")]":
                    depth += 1
                elif code[j] in "([":
                    depth -= 1
                    if depth == 0:
                        break
                j -= 1
            if j < 0:
                return None
            i = j
            continue
        token = re.search(r"(?:" + IDENT + r"(?:\." + IDENT + r")*|\d+\.?\d*[fF]?)$", code[:i])
        if token:
            i = token.start()
            if i > 0 and code[i - 1] == ".":
                continue
            return i
        return i if i < end and code[i] in "([" else None


def split_args(code: str, open_paren: int) -> list[tuple[int, int]]:
    """Spans of the top-level arguments of the call whose '(' is at open_paren."""
    close = match_close(code, open_paren) - 1
    spans, depth, start = [], 0, open_paren + 1
    for i in range(open_paren + 1, close):
        if code[i] in "([{":
            depth += 1
        elif code[i] in ")]}":
            depth -= 1
        elif code[i] == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    spans.append((start, close))
    return [(a + len(code[a:b]) - len(code[a:b].lstrip()), b - (len(code[a:b]) - len(code[a:b].rstrip())))
            for a, b in spans]


def inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= position < b for a, b in spans)


def format_number(value: float, suffix: str) -> str:
    text = f"{value:.6g}"
    return (text if any(c in text for c in ".e") else text + ".0") + suffix


def scaled_literal(text: str) -> str:
    value = float(text.rstrip("fF"))
    suffix = "f" if text[-1] in "fF" and not text.endswith(("e", "E")) else ""
    if value == 0:
        return format_number(0.25, suffix)
    return format_number(value * 100 if abs(value) < 0.01 else value * 0.5, suffix)


# -- context: address spans ----------------------------------------------------------------------------------

def address_spans(code: str, ctx: Context) -> list[tuple[int, int]]:
    """Spans of the line that compute addresses or indices rather than values."""
    spans = [(m.start(), match_close(code, m.start())) for m in re.finditer(r"\[", code)]
    if ctx.lang == "cpp":
        header = re.search(r"\bfor\s*\(", code)
        if header:
            spans.append((header.start(), match_close(code, header.end() - 1)))
        declared = re.match(r"\s*(?:const\s+)?(?:int64_t|int|auto|size_t|constexpr\s+int64_t)\b", code) or \
            re.match(r"\s*(?:const\s+)?\w+\s*\*", code)
        if declared:
            spans.append((0, len(code)))
        return spans
    for call in re.finditer(r"\btl\.(load|store)\(", code):
        args = split_args(code, call.end() - 1)
        spans.append(args[0])
        spans += [span for span in args if code[span[0]:span[1]].startswith("mask=")]
    mask = re.match(r"\s*mask\s*=", code)
    index = re.search(r"tl\.arange|tl\.program_id|_ptr\s*\+=|\brange\(", code)
    if mask or index or ctx.host:
        spans.append((0, len(code)))
    return spans


# -- rules ---------------------------------------------------------------------------------------------------

Rule = Callable[[str, Context], Iterator[Edit]]


def float_literals(code: str, ctx: Context) -> Iterator[Edit]:
    for m in FLOAT.finditer(code):
        if ctx.lang == "python" and ctx.host:
            continue
        yield Edit(m.start(), m.end(), scaled_literal(m.group(0)), "constants", "literal")


def float_attributes(code: str, ctx: Context) -> Iterator[Edit]:
    pattern = r"ks_attr_float\(" if ctx.lang == "cpp" else r"\battrs\["
    for m in re.finditer(pattern, code):
        end = match_close(code, m.end() - 1)
        text = ctx.line[m.start():end]
        factor = "100.0" if "eps" in text.lower() else "0.5"
        yield Edit(m.start(), end, f"({text} * {factor})", "constants", "attribute-scaled")


def comparison_ops(code: str) -> Iterator[re.Match]:
    return re.finditer(r"(?<![<>=!-])(<=|>=|<|>)(?![<>=])", code)


def value_comparison(code: str, m: re.Match, ctx: Context) -> bool:
    """Whether a comparison compares values (ties/NaN class) rather than indices or sizes (boundary class)."""
    if ctx.lang == "python":
        return m.group(1) in (">", ">=") and not ctx.host
    if ctx.for_header and ctx.for_header[0] <= m.start() < ctx.for_header[1]:
        return False
    start = primary_start(code, m.start() - 1) if code[m.start() - 1] == " " else None
    end = primary_end(code, m.end() + 1) if code[m.end():m.end() + 1] == " " else None
    if start is None or end is None:
        return False
    operands = code[start:m.start()] + code[m.end():end]
    return "[" in operands or bool(FLOAT.search(operands)) or "T(" in operands or "==" in code


def comparisons(code: str, ctx: Context) -> Iterator[Edit]:
    swap = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
    for m in comparison_ops(code):
        if code[m.start() - 1:m.start()] != " " or code[m.end():m.end() + 1] != " ":
            continue  # template brackets, shifts, '->'
        op = m.group(1)
        if value_comparison(code, m, ctx):
            yield Edit(m.start(), m.end(), swap[op], "ties", "tie-flip")
            left = primary_start(code, m.start() - 1)
            right = primary_end(code, m.end() + 1)
            if left is not None and right is not None:
                a, b = ctx.line[left:m.start() - 1], ctx.line[m.end() + 1:right]
                negated = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[op]
                bang = "!" if ctx.lang == "cpp" else "~"
                yield Edit(left, right, f"{bang}({a} {negated} {b})", "ties", "nan-flip")
                if "==" in code and op in ("<", ">") and "[" not in a + b:
                    yield Edit(m.start(), m.end(), "<" if op == ">" else ">", "ties", "tie-order")
        elif op in ("<", "<="):
            in_header = ctx.for_header is not None and ctx.for_header[0] <= m.start() < ctx.for_header[1]
            # `i < n` -> `i <= n` on a loop or mask bound touches one element past the end
            overrun = op == "<" and ((in_header and ctx.loop_var_used) or ctx.lang == "python")
            yield Edit(m.start(), m.end(), swap[op], "boundaries", "overrun-by-one" if overrun else "bound-flip")
            right = primary_end(code, m.end() + 1)
            if right is not None:
                yield Edit(right, right, " - 1", "boundaries", "bound-minus-one")


def loop_starts(code: str, ctx: Context) -> Iterator[Edit]:
    if ctx.lang != "cpp" or not ctx.for_header:
        return
    m = re.search(r"=\s*(\d+)\s*;", code[ctx.for_header[0]:ctx.for_header[1]])
    if m:
        start = ctx.for_header[0] + m.start(1)
        yield Edit(start, start + len(m.group(1)), str(int(m.group(1)) + 1), "boundaries", "start-plus-one")


def block_tails(code: str, ctx: Context) -> Iterator[Edit]:
    if ctx.lang != "python":
        return
    for m in re.finditer(r"triton\.cdiv\(", code):
        args = split_args(code, m.end() - 1)
        if len(args) == 2:
            a, b = (ctx.line[s:e] for s, e in args)
            yield Edit(m.start(), match_close(code, m.end() - 1), f"{a} // {b}", "boundaries", "cdiv-floor")
    for m in re.finditer(r"triton\.next_power_of_2\(", code):
        args = split_args(code, m.end() - 1)
        yield Edit(args[0][1], args[0][1], " - 1", "boundaries", "pow2-tail")
    for m in re.finditer(r"\brange\(", code):
        args = split_args(code, m.end() - 1)
        if len(args) >= 2:
            yield Edit(args[1][1], args[1][1], " - 1", "boundaries", "range-tail")
    for m in re.finditer(r"tl\.arange\(", code):
        end = match_close(code, m.end() - 1)
        if not ctx.host and re.match(r"\s*(offs|cols|rows) = ", code):
            yield Edit(m.start(), end, f"({ctx.line[m.start():end]} + 1)", "boundaries", "offset-plus-one")


def index_swaps(code: str, ctx: Context) -> Iterator[Edit]:
    operand = IDENT + r"(?:\[[^\]]*\])?"
    for m in re.finditer(rf"(?<![\w.\]])({operand}) \* ({IDENT}) \+ ({operand})(?![\w(\[.])", code):
        a, s, b = m.group(1), m.group(2), m.group(3)
        if a != b and inside(m.start(), ctx.address):
            yield Edit(m.start(), m.end(), f"{b} * {s} + {a}", "axis", "index-swap")


def stride_swaps(code: str, ctx: Context) -> Iterator[Edit]:
    if len(ctx.sizes) < 2 or (ctx.lang == "python" and ctx.host):
        return
    for m in re.finditer(rf"\* ({IDENT})\b(?!\()", code):
        name = m.group(1)
        if name in ctx.sizes and inside(m.start(), ctx.address):
            other = next(s for s in ctx.sizes if s != name)
            yield Edit(m.start(1), m.end(1), other, "axis", "stride-swap")


def python_axes(code: str, ctx: Context) -> Iterator[Edit]:
    if ctx.lang != "python":
        return
    for m in re.finditer(r"\[:, None\]|\[None, :\]", code):
        if ctx.host:
            continue
        other = "[None, :]" if m.group(0) == "[:, None]" else "[:, None]"
        yield Edit(m.start(), m.end(), other, "axis", "broadcast-swap")
    for m in re.finditer(r"tl\.program_id\(([01])\)", code) if ctx.grid_2d else ():
        yield Edit(m.start(1), m.end(1), "1" if m.group(1) == "0" else "0", "axis", "program-id-swap")
    for m in re.finditer(r"tl\.dot\(", code):
        args = split_args(code, m.end() - 1)
        if len(args) >= 2:
            (a0, a1), (b0, b1) = args[0], args[1]
            yield Edit(a0, b1, f"{ctx.line[b0:b1]}, {ctx.line[a0:a1]}", "axis", "dot-swap")
    m = re.match(rf"(\s*)((?:{IDENT}, )*)({IDENT}), ({IDENT}) = ({IDENT})\.shape\s*$", code)
    if m:
        start = m.start(3)
        yield Edit(start, m.end(4), f"{m.group(4)}, {m.group(3)}", "axis", "shape-unpack-swap")
    for m in re.finditer(r"\.shape\[-1\]", code):
        yield Edit(m.start(), m.end(), ".shape[0]", "axis", "last-axis-to-first")


def cpp_axes(code: str, ctx: Context) -> Iterator[Edit]:
    if ctx.lang != "cpp":
        return
    for m in re.finditer(rf"shape\[({IDENT}(?:\[\d\])?(?:\.|->)ndim - 1)\]", code):
        yield Edit(m.start(1), m.end(1), "0", "axis", "last-axis-to-first")
    for m in re.finditer(r"shape\[([01])\]", code):
        yield Edit(m.start(1), m.end(1), "1" if m.group(1) == "0" else "0", "axis", "shape-index-swap")


def dropped_terms(code: str, ctx: Context) -> Iterator[Edit]:
    for m in re.finditer(r"(?<=[\w)\]]) ([-+*/]) (?=[-\w(.!~])", code):
        if inside(m.start(), ctx.address) or (ctx.lang == "python" and ctx.host):
            continue
        op = m.group(1)
        end = primary_end(code, m.end())
        if end is None:
            continue
        if op in "+-":  # an addend carries its whole product
            while True:
                nxt = re.match(r" ([*/]) ", code[end:])
                if not nxt:
                    break
                following = primary_end(code, end + nxt.end())
                if following is None:
                    break
                end = following
        yield Edit(m.start(), end, "", "dropped", f"drop '{op}'")


def accumulations(code: str, ctx: Context) -> Iterator[Edit]:
    if ctx.lang == "cpp":
        m = re.search(r"(?:^|[;{)]\s*|\s)([\w\[\]+ ]*?\w\]?) \+= (.+?);", code)
        if m and not (ctx.for_header and ctx.for_header[0] <= m.start(1) < ctx.for_header[1]):
            target, value = m.group(1).strip(), ctx.line[m.start(2):m.end(2)]
            start = m.start(1) + (len(m.group(1)) - len(m.group(1).lstrip()))
            # the header's own rounding helpers: _Float16 next to a double needs libgcc helpers the link
            # check refuses (__extendhfdf2)
            for kind, (down, up) in {"half": ("ks_float_to_half", "ks_half_to_float"),
                                     "bfloat16": ("ks_float_to_bf16", "ks_bf16_to_float")}.items():
                yield Edit(start, m.end(2), f"{target} = {up}({down}((float)({target} + {value})))", "precision",
                           f"{kind}-accumulation")
        return
    for m in re.finditer(r"\.to\(tl\.float32\)", code):
        yield Edit(m.start(), m.end(), ".to(tl.float16)", "precision", "float32-to-float16")
    for m in re.finditer(r"dtype=tl\.float32", code):
        yield Edit(m.start(), m.end(), "dtype=tl.bfloat16", "precision", "bfloat16-accumulator")


def input_precision(line: str, ctx: Context) -> Iterator[Edit]:
    for m in re.finditer(r"input_precision=\"ieee\"", line):
        yield Edit(m.start(), m.end(), 'input_precision="tf32"', "precision", "tf32-dot")


def nan_functions(code: str, ctx: Context) -> Iterator[Edit]:
    if ctx.lang == "python":
        if ctx.host:
            return
        for m in re.finditer(r"tl\.(maximum|minimum)\(", code):
            args = split_args(code, m.end() - 1)
            if len(args) == 2:
                a, b = (ctx.line[s:e] for s, e in args)
                op = ">" if m.group(1) == "maximum" else "<"
                yield Edit(m.start(), match_close(code, m.end() - 1), f"tl.where({a} {op} {b}, {a}, {b})", "ties",
                           "nan-dropping-" + m.group(1))
        for m in re.finditer(r"tl\.(max|min)\(", code):
            args = split_args(code, m.end() - 1)
            x = ctx.line[args[0][0]:args[0][1]]
            fill = '-float("inf")' if m.group(1) == "max" else 'float("inf")'
            yield Edit(args[0][0], args[0][1], f"tl.where({x} == {x}, {x}, {fill})", "ties",
                       "nan-ignoring-" + m.group(1))
        return
    operand = r"[\w\[\]()]+?"
    for m in re.finditer(rf"({operand}) > ({operand}) \? \1 : \2(?![\w\[(])", code):
        yield Edit(m.start(), m.end(), f"__builtin_fmax({m.group(1)}, {m.group(2)})", "ties", "ternary-to-fmax")


RULES: tuple[Rule, ...] = (float_literals, float_attributes, comparisons, loop_starts, block_tails, index_swaps,
                           stride_swaps, python_axes, cpp_axes, dropped_terms, accumulations, nan_functions)


# -- the generator -------------------------------------------------------------------------------------------

def sizes_of(source: str, lang: str) -> tuple[str, ...]:
    """Names that hold sizes used as strides: the jit signature's non-pointer, non-constexpr parameters, or the
    C++ locals read from a tensor's shape."""
    if lang == "python":
        names: list[str] = []
        for m in re.finditer(r"@triton\.jit\s*\ndef \w+\(([^)]*)\)", source):
            for param in m.group(1).split(","):
                name = param.split(":")[0].strip()
                if name and not name.endswith("_ptr") and "constexpr" not in param and len(name) == 1:
                    names.append(name)
        return tuple(dict.fromkeys(names))
    names = re.findall(rf"\b({IDENT}) = inputs\[\d\]\.shape\[\d\]", source)
    return tuple(dict.fromkeys(names))


def code_lines(source: str, lang: str) -> Iterator[tuple[int, str, str, bool]]:
    """(index, line, blanked code, in host code) for every line that holds code worth mutating."""
    in_doc, host = False, False
    for index, line in enumerate(source.splitlines()):
        stripped = line.strip()
        if lang == "python":
            if stripped.startswith(('"""', "'''")):
                if not (stripped.count('"""') >= 2 or stripped.count("'''") >= 2):
                    in_doc = not in_doc
                continue
            if in_doc or stripped.startswith(("import ", "from ", "@", "#")):
                continue
            if line.startswith("def "):
                host = line.startswith("def ks_kernel")
                continue
        elif stripped.startswith(("#", "//")) or not stripped:
            continue
        if stripped:
            yield index, line, blank_line(line, lang), host


def generate(source: str, lang: str, kernel: str) -> list[Mutant]:
    """Every mutant the rules make of `source` ("cpp" or "python"), in line order, duplicates removed."""
    lines = source.splitlines(keepends=True)
    ctx_sizes = sizes_of(source, lang)
    seen, mutants = {source}, []
    for index, line, code, host in code_lines(source, lang):
        ctx = Context(lang=lang, line=line.rstrip("\n"), sizes=ctx_sizes, host=host,
                      grid_2d="program_id(1)" in source)
        header = re.search(r"\bfor\s*\(", code) if lang == "cpp" else None
        ctx.for_header = (header.start(), match_close(code, header.end() - 1)) if header else None
        ctx.address = address_spans(code, ctx)
        if header:
            var = re.match(rf"\s*(?:const\s+)?(?:unsigned\s+)?(?:long\s+long|long|int64_t|int32_t|int|size_t|auto)\s+({IDENT})", code[header.end():])
            rest = source.replace(line.rstrip("\n")[header.start():ctx.for_header[1]], "", 1)
            ctx.loop_var_used = bool(var) and re.search(rf"\b{var.group(1)}\b", rest) is not None
        edits = [edit for rule in RULES for edit in rule(code, ctx)]
        edits += list(input_precision(line.rstrip("\n"), ctx))
        for edit in edits:
            text = line.rstrip("\n")
            after = text[:edit.start] + edit.text + text[edit.end:]
            if after == text:
                continue
            mutated = "".join(lines[:index]) + after + lines[index][len(text):] + "".join(lines[index + 1:])
            if mutated in seen:
                continue
            seen.add(mutated)
            mutants.append(Mutant(kernel=kernel, cls=edit.cls, rule=edit.rule, line=index + 1, before=text.strip(),
                                  after=after.strip(), source=mutated, column=edit.start))
    return mutants


def hand_written(source: str, kernel: str, edits: list[tuple[str, str, str, str]]) -> list[Mutant]:
    """Mutants from (class, rule, old, new) replacements of one exact line fragment each; skipped when the
    fragment is not in the source (the kernel changed)."""
    mutants = []
    for cls, rule, old, new in edits:
        if source.count(old) != 1:
            continue
        at = source.index(old)
        line = source.count("\n", 0, at)
        column = at - (source.rfind("\n", 0, at) + 1)
        mutated = source.replace(old, new)
        text = source.splitlines()[line]
        mutants.append(Mutant(kernel=kernel, cls=cls, rule=rule, line=line + 1, before=text.strip(),
                              after=mutated.splitlines()[line].strip(), source=mutated, column=column,
                              hand_written=True))
    return mutants


# Reached by no line-wise rule: eps moved outside the square root (the example).
HAND_WRITTEN: dict[str, list[tuple[str, str, str, str]]] = {
    "l2_add_rms_norm.cpp": [("constants", "eps-outside-sqrt", "std::sqrt((float)(squares / n) + eps)",
                             "(std::sqrt((float)(squares / n)) + eps)")],
    "l2_rms_norm.py": [("constants", "eps-outside-sqrt", "tl.sqrt(tl.sum(x * x, axis=0) / n + eps)",
                        "(tl.sqrt(tl.sum(x * x, axis=0) / n) + eps)")],
    "l1_rms_norm_plain.py": [("constants", "eps-outside-sqrt", "tl.sqrt(tl.sum(x * x, axis=0) / n + eps)",
                              "(tl.sqrt(tl.sum(x * x, axis=0) / n) + eps)")],
}


def mutants_of(source: str, lang: str, kernel: str, file_name: str = "") -> list[Mutant]:
    """Generated mutants, then the hand-written ones for this file (by its base name)."""
    generated = generate(source, lang, kernel)
    known = {m.source for m in generated} | {source}
    extra = [m for m in hand_written(source, kernel, HAND_WRITTEN.get(file_name, [])) if m.source not in known]
    return generated + extra
