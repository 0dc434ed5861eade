"""The static half of "no borrowed compute": what kernel.py may import, name and reach."""

from __future__ import annotations

import re

import pytest

from kernelsage.knowledge import builtin_pack
from kernelsage.tools.triton.source_check import check_source

HEAD = "import torch\nimport triton\nimport triton.language as tl\n"
BODY = "\ndef ks_kernel(inputs, outputs, attrs):\n    {}\n"


@pytest.mark.parametrize(("line", "words"), [
    ("outputs[0].copy_(torch.relu(inputs[0]))", "torch.relu"),
    ("import os", "import of 'os'"),
    ("from torch import relu", "torch.relu"),
    ("open('/etc/passwd')", "'open'"),
    ("getattr(torch, 'relu')", "'getattr'"),
    ("__import__('os')", "'__import__'"),
    ("inputs[0].__class__", "private attribute"),
    ("torch._C", "private attribute"),
    ("tl.core.builtins", "reaches the module 'builtins'"),
    ("triton.testing.do_bench", "triton.testing"),
    ("inputs[0].numpy()", "attribute 'numpy'"),
    ("inputs[0].tolist()", "attribute 'tolist'"),
    ("t = torch", "used as a value"),
    ("from triton.language import *", "name what you use"),
])
def test_borrowing_and_escaping_are_refused(line: str, words: str) -> None:
    source = HEAD + (line + "\n" + BODY.format("pass") if line.startswith(("import", "from")) else BODY.format(line))
    problems = check_source(source)
    assert problems and all(p.forbidden for p in problems)
    assert any(words in p.message for p in problems), [p.message for p in problems]


def test_a_syntax_error_and_a_missing_entry_point_are_compile_errors() -> None:
    assert [p.forbidden for p in check_source("def ks_kernel(:\n")] == [False]
    assert "ks_kernel" in check_source("import triton\n")[0].message


def test_what_kernels_need_is_allowed() -> None:
    source = HEAD + "import math\nfrom triton.language.extra import libdevice\n" + BODY.format(
        "buf = torch.empty((4,), dtype=torch.float32, device=inputs[0].device); n = triton.cdiv(inputs[0].numel(), "
        "math.prod([2])); return tl.math.exp")
    assert check_source(source) == []


def test_the_knowledge_pack_examples_pass_the_check() -> None:
    pack = dict(builtin_pack("triton"))
    code = re.search(r"```python\n(.*?)```", pack["worked_example.md"], re.DOTALL)
    assert code is not None and check_source(code.group(1)) == []
