"""Tunables of a Triton kernel: the `triton.Config` list of its `@triton.autotune`, read with `ast` (the source is
never imported here), and applied by rewriting that list to the one configuration being tried."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TypeGuard

from kernelsage.tuning.space import Config, TuningError, TuningSpace, listed_space

FILE = "kernel.py"
LAUNCH_KEYWORDS = ("num_warps", "num_stages", "num_ctas")  # tuned like the meta-parameters when a Config sets them


@dataclass(frozen=True)
class AutotuneList:
    """Where the configuration list is in the source, and each entry's source text and values."""

    span: tuple[int, int]  # byte offsets of the list literal in the UTF-8 source
    entries: tuple[tuple[str, dict[str, int]], ...]


def _line_starts(data: bytes) -> list[int]:
    starts, total = [], 0
    for line in data.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    return [*starts, total]


def _span(node: ast.expr, starts: list[int]) -> tuple[int, int]:
    """The node's byte offsets in the source (ast's columns count UTF-8 bytes)."""
    end_line, end_col = node.end_lineno or node.lineno, node.end_col_offset or 0
    return starts[node.lineno - 1] + node.col_offset, starts[end_line - 1] + end_col


def _is_autotune(decorator: ast.expr) -> TypeGuard[ast.Call]:
    func = decorator.func if isinstance(decorator, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr == "autotune" and isinstance(func.value, ast.Name) \
        and func.value.id == "triton"


def _configs_argument(call: ast.Call, module: ast.Module) -> ast.List:
    node = next((k.value for k in call.keywords if k.arg == "configs"), call.args[0] if call.args else None)
    if isinstance(node, ast.Name):  # configs=CONFIGS, a list assigned at module level
        assigned = [s.value for s in module.body if isinstance(s, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == node.id for t in s.targets)]
        node = assigned[-1] if assigned else node
    if not isinstance(node, ast.List):
        raise TuningError(f"{FILE}:{call.lineno}: @triton.autotune's configs must be a list literal of "
                          "triton.Config(...) (or a module-level name assigned one)")
    return node


def _config_values(node: ast.expr) -> dict[str, int]:
    where = f"{FILE}:{node.lineno}"
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Config"):
        raise TuningError(f"{where}: every entry of the configs list must be triton.Config(...)")
    meta = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "kwargs"), None)
    try:
        values = ast.literal_eval(meta) if meta is not None else {}
        values.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg in LAUNCH_KEYWORDS})
    except (ValueError, TypeError, AttributeError):
        raise TuningError(f"{where}: triton.Config's values must be literals (a dict of names to integers)") from None
    if not isinstance(values, dict) or not all(isinstance(k, str) and type(v) is int for k, v in values.items()):
        raise TuningError(f"{where}: triton.Config's meta-parameters must map names to integers")
    return values


def find_autotune(source: str) -> AutotuneList:
    """The one `@triton.autotune` configuration list of a Triton source."""
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise TuningError(f"{FILE}:{exc.lineno}: not valid Python: {exc.msg}") from None
    calls = [d for f in ast.walk(module) if isinstance(f, ast.FunctionDef) for d in f.decorator_list
             if _is_autotune(d)]
    if not calls:
        raise TuningError("no tunable parameters declared: decorate the @triton.jit kernel with "
                          "@triton.autotune(configs=[triton.Config({...}), ...], key=[...])")
    if len(calls) > 1:
        raise TuningError(f"{FILE}: {len(calls)} @triton.autotune kernels; kernelsage tunes one per source")
    listed = _configs_argument(calls[0], module)
    if not listed.elts:
        raise TuningError(f"{FILE}:{listed.lineno}: @triton.autotune's configs list is empty")
    data = source.encode()
    starts = _line_starts(data)
    entries = tuple((data[slice(*_span(e, starts))].decode(), _config_values(e)) for e in listed.elts)
    return AutotuneList(_span(listed, starts), entries)


def triton_space(files: dict[str, str]) -> TuningSpace:
    """The configurations a Triton candidate's autotune lists, the first being the default."""
    return listed_space([values for _, values in find_autotune(files.get(FILE, "")).entries])


def apply_triton_config(files: dict[str, str], config: Config) -> dict[str, str]:
    """The candidate with its autotune list cut to the entry that sets `config` (autotune then times nothing)."""
    source = files[FILE]
    found = find_autotune(source)
    wanted = dict(config)
    text = next((text for text, values in found.entries if values == wanted), None)
    if text is None:
        raise TuningError(f"no triton.Config in the autotune list sets {wanted}")
    data, (start, end) = source.encode(), found.span
    return {**files, FILE: (data[:start] + f"[{text}]".encode() + data[end:]).decode()}
