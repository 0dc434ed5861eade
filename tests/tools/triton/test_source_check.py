"""The static half of "no borrowed compute": kernel.py against the allowlist grammar (tools/triton/source_check.py)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from kernelsage.knowledge import builtin_pack
from kernelsage.tools.triton.source_check import check_source

HEAD = "import torch\nimport triton\nimport triton.language as tl\n"
BODY = "\ndef ks_kernel(inputs, outputs, attrs):\n    {}\n"
KERNELS = Path(__file__).resolve().parent / "kernels"
EXAMPLES = sorted(f.name for f in resources.files("kernelsage.tools.triton.examples").iterdir()
                  if f.name.endswith(".py") and not f.name.startswith("_"))
# Honest test kernels: each reaches the compiler or the judge and fails (or passes) there, not here.
HONEST = ["relu.py", "relu_misses_last.py", "ascend_autotuned.py", "ascend_bad_launch.py", "ascend_cuda_libdevice.py",
          "ascend_dot_1d.py", "ascend_wrong_op.py"]

# What kernels are written with beyond the shipped examples: autotune and heuristics, a grid lambda, block
# pointers, libdevice, a combine function for tl.reduce, static loops, dtype branches, a helper, type hints.
RICH = '''"""A kernel using most of what the grammar allows."""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

BLOCK_M, BLOCK_N = 32, 32
DTYPES = {torch.float16: tl.float16, torch.float32: tl.float32}
LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)
SCALE = 1.0 / math.sqrt(64) + max(1, 2) - triton.cdiv(10, 3)


@triton.jit
def _add(a, b):
    return a + b


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": BLOCK_N})],
                 key=["n"], warmup=5)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _kernel(x_ptr, y_ptr, n, stride, eps, BLOCK: tl.constexpr, EVEN: tl.constexpr, ROWS: tl.constexpr = 1):
    """Docstrings are fine."""
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(ROWS):
        x = tl.load(x_ptr + i * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
        acc += tl.where(mask, libdevice.tanh(x) * LOG2E, 0.0)
    k = 0
    while k < 2:
        k += 1
    total = tl.reduce(acc, 0, _add)
    tl.static_assert(BLOCK % 16 == 0)
    scale = tl.math.rsqrt(total + eps) if EVEN else tl.extra.cuda.libdevice.rsqrt(total + eps)
    tl.store(y_ptr + offs, (acc * scale).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tile(a_ptr, c_ptr, m, k, BM: tl.constexpr, BK: tl.constexpr):
    block = tl.make_block_ptr(base=a_ptr, shape=(m, k), strides=(k, 1), offsets=(0, 0), block_shape=(BM, BK),
                              order=(1, 0))
    a = tl.load(block, boundary_check=(0, 1))
    block = tl.advance(block, (0, BK))
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BK + tl.arange(0, BK)[None, :], a.T.to(tl.float32))


def _grid(n: int, block: int) -> tuple[int, ...]:
    return (triton.cdiv(n, block),)


def ks_kernel(inputs: list[torch.Tensor], outputs: list[torch.Tensor], attrs: dict) -> None:
    x, y = inputs[0], outputs[0]
    assert x.is_contiguous() and x.dtype in DTYPES, "contiguous float inputs"
    if x.dtype not in (torch.float16, torch.float32):
        raise ValueError(f"unsupported dtype {x.dtype}")
    if x.numel() == 0:
        return
    n, stride = x.shape[-1], x.stride(0)
    eps = float(attrs.get("eps", 1e-5))
    scratch = torch.empty((max(n, 1),), dtype=torch.float32, device=x.device)
    flat = x.reshape(-1).contiguous()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    _kernel[grid](flat, y, n, stride, eps)
    _kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](flat, scratch, n, stride, eps, ROWS=1)
    for index, size in enumerate(x.shape):
        n = n + size * index
    m, *rest, k = x.shape
    scratch = torch.zeros((*x.shape[:-1], m), dtype=torch.float32, device=x.device)
    _tile[_grid(m, 16)](*inputs, y, m, k, BM=16, BK=16, num_warps=4)
'''


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_shipped_example_passes_the_check(name: str) -> None:
    source = resources.files("kernelsage.tools.triton.examples").joinpath(name).read_text(encoding="utf-8")
    assert check_source(source) == []


@pytest.mark.parametrize("name", HONEST)
def test_the_honest_test_kernels_pass_the_check(name: str) -> None:
    assert check_source((KERNELS / name).read_text()) == []


def test_the_knowledge_pack_examples_pass_the_check() -> None:
    pack = dict(builtin_pack("triton"))
    code = re.search(r"```python\n(.*?)```", pack["worked_example.md"], re.DOTALL)
    assert code is not None and check_source(code.group(1)) == []


def test_what_kernels_are_written_with_is_allowed() -> None:
    assert check_source(RICH) == []


@pytest.mark.parametrize(("line", "words"), [
    ("outputs[0].copy_(torch.relu(inputs[0]))", "torch.relu"),
    ("import os", "import of 'os'"),
    ("from torch import relu", "torch.relu"),
    ("open('/etc/passwd')", "the builtin 'open'"),
    ("getattr(torch, 'relu')", "the builtin 'getattr'"),
    ("__import__('os')", "'__import__' is not allowed"),
    ("inputs[0].__class__", "attribute '__class__' is not allowed"),
    ("torch._C", "private name 'torch._C'"),
    ("tl.core.builtins", "triton.language.core is not on the list"),
    ("tl.math.wraps(len)", "not one of triton.language.math's functions"),
    ("triton.testing.do_bench", "triton.testing"),
    ("inputs[0].numpy()", "attribute 'numpy' is not allowed"),
    ("inputs[0].tolist()", "attribute 'tolist' is not allowed"),
    ("inputs[0].relu()", "attribute 'relu' is not allowed"),
    ("t = torch", "used as a value"),
    ("from triton.language import *", "name what you use"),
    ("x = [v for v in inputs]", "a list comprehension"),
    ("x = (v for v in inputs)", "a generator expression"),
    ("f = max; f(1, 2)", "the builtin 'max' is not available"),
    ("inputs.__len__()", "'__len__'"),
    ("'{0.shape}'.format(inputs[0])", "attribute 'format'"),
    ("with open('x') as f: pass", "with is not allowed"),
    ("global torch", "global is not allowed"),
    ("del inputs", "del is not allowed"),
    ("outputs[0][0] = 1.0", "assignment to an attribute or a subscript"),
    ("inputs[0].cached = 1", "assignment to an attribute or a subscript"),
    ("y = 1; import math", "an import inside a function"),
    ("lambda: 0", "a lambda"),
    ("(n := 3)", "assignment expression"),
    ("raise SystemExit(0)", "raise only"),
    ("raise ValueError('x') from None", "raise only"),
    ("inspect.currentframe()", "'inspect' is defined nowhere in kernel.py: a kernel may not use what the runtime"),
    ("vars()", "the builtin 'vars'"),
])
def test_what_is_not_on_the_lists_is_refused(line: str, words: str) -> None:
    source = HEAD + (line + "\n" + BODY.format("pass") if line.startswith(("import", "from")) else BODY.format(line))
    problems = check_source(source)
    assert problems and all(p.forbidden for p in problems), [p.message for p in problems]
    assert any(words in p.message for p in problems), [p.message for p in problems]


@pytest.mark.parametrize(("module_level", "words"), [
    ("KEPT = torch.zeros(16)", "the call of torch.zeros in a module-level constant"),
    ("SIZES = [1, 2]", "a module-level constant may not be a list"),
    ("class Holder:\n    pass", "a class is not allowed at module level"),
    ("async def peek():\n    pass", "an async function is not allowed at module level"),
    ("if True:\n    BLOCK = 4", "the construct If is not allowed at module level"),
    ("print('at import')", "the construct Expr is not allowed at module level"),
    ("X = inputs.shape", "attribute 'shape' in a module-level constant"),
    ("def helper(kept=[]):\n    pass", "a default value must be a literal"),
    ("@staticmethod\ndef helper():\n    pass", "must be @triton.jit"),
    ("@triton.autotune(configs=[], key=[], prune_configs_by={'early_config_prune': len})\n@triton.jit\n"
     "def k(x):\n    pass", "the keyword prune_configs_by is not allowed"),
    ("@triton.autotune(configs=[triton.Config({}, pre_hook=len)], key=[])\n@triton.jit\ndef k(x):\n    pass",
     "the keyword pre_hook is not allowed"),
    ("@triton.jit\ndef k(x):\n    y = torch.float32", "torch is not available inside a @triton.jit function"),
    ("@triton.jit\ndef k(x):\n    return x.handle", "attribute 'handle' is not allowed (allowed in a @triton.jit"),
    ("@triton.jit\ndef k(x):\n    return x.item()", "attribute 'item' is not allowed"),
    ("@triton.jit\ndef k(x):\n    print(x)", "the builtin 'print' is not available"),
    ("@triton.jit\ndef k(x):\n    k[(1,)](x)", "kernels are launched from ks_kernel"),
    ("@triton.jit\ndef k(x):\n    raise ValueError('no')", "raise (only in ks_kernel or a helper)"),
    ("if __name__ == '__main__':\n    pass", "'__name__' is not allowed"),
])
def test_module_level_and_jit_bodies_are_held_to_their_grammar(module_level: str, words: str) -> None:
    problems = check_source(HEAD + module_level + "\n" + BODY.format("pass"))
    assert problems and any(p.forbidden for p in problems), [p.message for p in problems]
    assert any(words in p.message for p in problems), [p.message for p in problems]


def test_a_problem_names_its_line_the_construct_and_what_is_allowed() -> None:
    source = HEAD + BODY.format("n = inputs[0].shape[0]\n    frame = inputs[0].gi_frame")
    [problem] = check_source(source)
    assert (problem.line, problem.forbidden) == (7, True)
    assert problem.message.startswith("kernel.py line 7: attribute 'gi_frame' is not allowed (allowed on tensors, ")
    assert "shape, size, squeeze, stride" in problem.message


def test_a_name_defined_nowhere_is_a_compile_error_not_a_refusal() -> None:
    problems = check_source((KERNELS / "ascend_undefined_name.py").read_text())
    assert [(p.line, p.forbidden) for p in problems] == [(11, False)]
    assert "the name 'threshold' is defined nowhere in kernel.py" in problems[0].message


def test_a_syntax_error_and_a_missing_entry_point_are_compile_errors() -> None:
    assert [p.forbidden for p in check_source("def ks_kernel(:\n")] == [False]
    assert "ks_kernel" in check_source("import triton\n")[0].message


def test_module_constants_may_be_defined_below_the_function_that_reads_them() -> None:
    assert check_source(HEAD + BODY.format("return BLOCK * 2") + "\nBLOCK = 1024\n") == []
