"""KernelBench's tolerance as the checked-out version of its `eval.py` sets it, read from the file (never run).

KernelBench changed its rule between versions: v0 and v0.1, the published ones (`src/eval.py`), compare every
output with `torch.allclose(output, output_new, atol=1e-02, rtol=1e-02)`; the development code since 2c3dbda
(`src/kernelbench/eval.py`, version 0.2.0.dev0) picks one tolerance per precision from a dict literal in
`get_tolerance_for_precision` (`torch.float32: 1e-4`, `torch.float16: 1e-2`, `torch.bfloat16: 1e-2`) and
passes it as both atol and rtol. Which rule a checkout has is read from its own file with `ast`:

1. a dict literal whose keys are `torch.<float dtype>` and whose values are numbers: one tolerance per dtype
   (dtypes it does not list take its float32 value: the strictest reading);
2. else a `torch.allclose(..., atol=<number>, rtol=<number>)` call: that pair for every dtype;
3. else (no eval.py, or neither found) the published rule, saying so.

The published rule stays available by name (`RULE_NAMES`): `--tolerance-rule published` or
KERNELSAGE_TOLERANCE_RULE=published judges as the papers and leaderboards did.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from pathlib import Path

from kernelsage.errors import ConfigurationError
from kernelsage.tasks.tolerance import FLOAT_DTYPES, KERNELBENCH_RULE, Tolerance, ToleranceRule

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, published for 3.10
    import tomli as tomllib

TOLERANCE_RULE_ENV = "KERNELSAGE_TOLERANCE_RULE"
CHECKOUT, PUBLISHED = "checkout", "published"
RULE_NAMES = (CHECKOUT, PUBLISHED)
EVAL_FILES = ("src/kernelbench/eval.py", "src/eval.py")  # since the package move (2c3dbda), and before


def rule_name(given: str | None) -> str:
    """The rule a load asks for: the argument, else KERNELSAGE_TOLERANCE_RULE, else 'checkout'."""
    name = (given or os.environ.get(TOLERANCE_RULE_ENV) or CHECKOUT).strip().lower()
    if name not in RULE_NAMES:
        raise ConfigurationError(f"tolerance rule {name!r}: choose {' or '.join(RULE_NAMES)} (KernelBench's rule "
                                 "as the checkout's eval.py sets it, or its published v0/v0.1 rule)")
    return name


def kernelbench_rule(repository: Path | None, name: str = CHECKOUT) -> ToleranceRule:
    """The rule that judges a KernelBench task: the published one when asked for, else the one the
    checkout's `eval.py` sets (the published one, saying why, where none is recognised)."""
    if name == PUBLISHED:
        return ToleranceRule(KERNELBENCH_RULE.suite, KERNELBENCH_RULE.floats,
                             "the published rule, asked for by name: " + KERNELBENCH_RULE.source, PUBLISHED)
    if repository is None:
        return _published_because("no KernelBench checkout around the task file")
    stamps = tuple((path.stat().st_mtime_ns if path.is_file() else 0) for path in
                   (repository / relative for relative in EVAL_FILES))
    return _checkout_rule(str(repository.resolve()), stamps)


@functools.lru_cache(maxsize=16)
def _checkout_rule(repository: str, stamps: tuple[int, ...]) -> ToleranceRule:
    """The rule of the checkout's eval.py; `stamps` (the files' modification times) key the cache, so that a
    file changed since is read again (a whole suite's tasks share one reading)."""
    root = Path(repository)
    for relative in EVAL_FILES:
        path = root / relative
        if not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"), str(path))
        except (SyntaxError, ValueError):
            return _published_because(f"{relative} does not parse")
        version = _version(root)
        found = _per_dtype(tree) or _allclose(tree)
        if found is None:
            return _published_because(f"{relative} sets no tolerance kernelsage recognises")
        floats, where = found
        return ToleranceRule(KERNELBENCH_RULE.suite, floats, f"{relative} {where}, as checked out"
                             f"{f' (version {version})' if version else ''}; the published v0/v0.1 rule "
                             "(1e-2 for every dtype) by name: --tolerance-rule published", CHECKOUT)
    return _published_because(f"the checkout has no {' or '.join(EVAL_FILES)}")


def _published_because(why: str) -> ToleranceRule:
    return ToleranceRule(KERNELBENCH_RULE.suite, KERNELBENCH_RULE.floats,
                         f"{why}: the published rule, {KERNELBENCH_RULE.source}", PUBLISHED)


def _version(root: Path) -> str:
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return ""
    version = project.get("version") if isinstance(project, dict) else None
    return version if isinstance(version, str) else ""


def _number(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _torch_float(node: ast.expr | None) -> str | None:
    """'float32' for `torch.float32` (and the aliases `torch.float`, `torch.half`), else None."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch"):
        return None
    name = {"float": "float32", "half": "float16", "double": "float64"}.get(node.attr, node.attr)
    return name if name in FLOAT_DTYPES else None


def _per_dtype(tree: ast.Module) -> tuple[dict[str, Tolerance], str] | None:
    """The first dict literal {torch.<float dtype>: number, ...} with a float32 entry: a tolerance per dtype."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict) or not node.keys:
            continue
        table = {_torch_float(key): _number(value) for key, value in zip(node.keys, node.values, strict=True)}
        if None in table or None in table.values() or "float32" not in table:
            continue
        listed = {str(dtype): Tolerance(float(value or 0), float(value or 0)) for dtype, value in table.items()}
        floats = {dtype: listed.get(dtype, listed["float32"]) for dtype in FLOAT_DTYPES}
        shown = ", ".join(f"{dtype} {value:g}" for dtype, value in table.items())
        return floats, f"lines {node.lineno}-{node.end_lineno}: atol = rtol per dtype ({shown}; others as float32)"
    return None


def _allclose(tree: ast.Module) -> tuple[dict[str, Tolerance], str] | None:
    """The first `torch.allclose(..., atol=<number>, rtol=<number>)`: that pair for every dtype."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "allclose"):
            continue
        given = {k.arg: _number(k.value) for k in node.keywords if k.arg in ("atol", "rtol")}
        atol, rtol = given.get("atol"), given.get("rtol")
        if atol is not None and rtol is not None:
            return ({dtype: Tolerance(atol, rtol) for dtype in FLOAT_DTYPES},
                    f"line {node.lineno}: torch.allclose(atol={atol:g}, rtol={rtol:g}) on every output")
    return None
