"""Candidates that reach Python through frames, the runtime's globals or format strings
(tests/tools/triton/attacks/frame_*.py, grammar_*.py): each is refused by the source check before any process
starts. The refused-names list the grammar replaced let all but frame_traceback through; run as if checked on
the interpreter (once, by hand), every frame walk and grammar_interpreter_globals computed l1_relu with NumPy and
was judged correct, and grammar_format_string's exception carried the real builtins out as text."""

from __future__ import annotations

import pytest
from tests.tools.triton.conftest import HERE

from kernelsage.tools.results import Candidate, Status
from kernelsage.tools.triton.source_check import check_source

ATTACKS = HERE / "attacks"


@pytest.mark.parametrize(("name", "words"), [
    ("frame_generator.py", ["yield is not allowed", "attribute 'gi_frame'", "attribute 'f_back'",
                            "attribute 'f_builtins'", "attribute 'f_globals'", "the builtin 'next'"]),
    ("frame_traceback.py", ["try is not allowed", "attribute '__traceback__'", "attribute 'tb_frame'"]),
    ("frame_coroutine.py", ["an async function is not allowed", "attribute 'cr_frame'", "attribute 'send'"]),
    ("frame_comprehension.py", ["a generator expression", "a list comprehension", "attribute 'gi_frame'"]),
    ("grammar_lambda_default.py", ["a default value must be a literal", "a lambda", "yield is not allowed"]),
    ("grammar_format_string.py", ["attribute 'format' is not allowed"]),
    ("grammar_interpreter_globals.py", ["the name 'np' is defined nowhere in kernel.py: a kernel may not use what "
                                        "the runtime puts in its globals", "attribute 'asarray'"]),
])
def test_a_walk_out_of_kernel_py_is_refused_by_the_check(name: str, words: list[str]) -> None:
    problems = check_source((ATTACKS / name).read_text())
    messages = [p.message for p in problems]
    assert problems and all(p.forbidden for p in problems), messages
    for word in words:
        assert any(word in m for m in messages), (word, messages)


def test_the_generator_frame_walk_ends_forbidden_through_the_backend(triton_backend) -> None:
    source = (ATTACKS / "frame_generator.py").read_text()
    compiled = triton_backend.compile(Candidate(task_id="l1_relu", files={"kernel.py": source}))
    assert compiled.status is Status.FORBIDDEN and not compiled.ok and compiled.artifact is None
    assert "attribute 'gi_frame' is not allowed" in compiled.log
    assert any(e.line == 17 and "gi_frame" in e.message for e in compiled.errors), compiled.log
