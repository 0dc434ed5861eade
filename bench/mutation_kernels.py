"""The honest reference kernels the mutation benchmark starts from: the cpu and triton backends' examples and
the honest kernels the tests keep (read from their files as data, never imported).

Used by bench/mutation.py.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_EXAMPLES = ROOT / "src" / "kernelsage" / "tools" / "cpu" / "examples"
TRITON_EXAMPLES = ROOT / "src" / "kernelsage" / "tools" / "triton" / "examples"
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"


@dataclass(frozen=True)
class Reference:
    """One honest kernel: which backend judges it, for which task of which suite, and where it came from."""

    name: str  # unique label, e.g. "cpu/l2_softmax" or "tests/cpu/scaled_tanh"
    backend: str  # "cpu" or "triton"
    task_id: str
    suite: str  # "builtin" or a path to a fixture suite
    source: str
    origin: str  # the file it was read from, relative to the repository
    file_name: str  # base name used to look up hand-written mutants

    @property
    def lang(self) -> str:
        return "cpp" if self.backend == "cpu" else "python"


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _string_constant(path: Path, name: str) -> str:
    """The value of a module-level string assignment `name = "..."` in a Python file, read without running it."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError(f"{_relative(path)} no longer defines {name}: update bench/mutation_kernels.py")


def examples() -> list[Reference]:
    """The shipped examples of both backends, each for the built-in task of its name."""
    found = [Reference(f"cpu/{p.stem}", "cpu", p.stem, "builtin", p.read_text(encoding="utf-8"), _relative(p), p.name)
             for p in sorted(CPU_EXAMPLES.glob("*.cpp"))]
    found += [Reference(f"triton/{p.stem}", "triton", p.stem, "builtin", p.read_text(encoding="utf-8"), _relative(p),
                        p.name) for p in sorted(TRITON_EXAMPLES.glob("*.py")) if not p.name.startswith("_")]
    return found


def test_kernels() -> list[Reference]:
    """The honest kernels the tests keep (the others there are attacks or deliberately wrong)."""
    relu_py = TESTS / "tools" / "triton" / "kernels" / "relu.py"
    scripts = TESTS / "graph" / "scripts.py"
    suites = TESTS / "evals" / "test_eval_suites.py"
    gelu = TESTS / "tools" / "kernels" / "gelu_tanh_offset.cpp"
    return [
        Reference("tests/triton/relu", "triton", "l1_relu", "builtin", relu_py.read_text(encoding="utf-8"),
                  _relative(relu_py), relu_py.name),
        Reference("tests/cpu/slow_relu", "cpu", "l1_relu", "builtin", _string_constant(scripts, "SLOW"),
                  f"{_relative(scripts)}:SLOW", "slow_relu.cpp"),
        Reference("tests/cpu/scaled_tanh", "cpu", "level1/1_Scaled_Tanh", str(FIXTURES / "kernelbench"),
                  _string_constant(suites, "SCALED_TANH"), f"{_relative(suites)}:SCALED_TANH", "scaled_tanh.cpp"),
        # The tests replace the OFFSET token; 0.0f is the honest kernel (tests/evals/test_eval_suites.py).
        Reference("tests/cpu/gelu_tanh", "cpu", "level1/Activation/GeluCustom", str(FIXTURES / "npukernelbench"),
                  gelu.read_text(encoding="utf-8").replace("OFFSET", "0.0f"), _relative(gelu), gelu.name),
    ]


def references(include_tests: bool = True) -> list[Reference]:
    """Every reference kernel, examples first."""
    return examples() + (test_kernels() if include_tests else [])
