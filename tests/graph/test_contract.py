"""The kernel's contract reaches every writing prompt, under every policy, whatever the memory shows."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from kernelsage.graph.nodes.contract import header_essentials, kernel_contract
from tests.graph.scripts import SLOW, candidate, example_source

ESSENTIALS = ("int ks_kernel(const ks_tensor* inputs", "typedef struct ks_tensor", "KS_FLOAT16",
              "static inline float ks_half_to_float(uint16_t h);", "ks_attr_float(", "every element must be written")


def writing_prompts(model) -> list[str]:
    """The first user message of every generator / optimizer request (re-asks included)."""
    prompts = []
    for request in model.requests:
        text = next(str(m.content) for m in request if isinstance(m, HumanMessage))
        if text.startswith(("# Task", "# Make it faster")):
            prompts.append(text)
    return prompts


@pytest.mark.parametrize("policy", ["none", "sage"])
def test_every_writing_prompt_holds_the_contract_and_every_case(episode, seeded, policy: str) -> None:
    state, model = episode([
        "no code at all", "still none", "nothing",          # round 1: a parse error (the query changes)
        candidate(SLOW),                                      # round 2: correct
        candidate(example_source("l1_relu")),                 # round 3: the optimizer
        "- Drop redundant passes.",
    ], policy=policy, budget=3, seed_knowledge=False)
    assert [a["status"] for a in state["attempts"]] == ["parse_error", "ok", "ok"]
    prompts = writing_prompts(model)
    assert len(prompts) == 5 and prompts[-1].startswith("# Make it faster")
    for prompt in prompts:
        for essential in ESSENTIALS:
            assert essential in prompt, essential
        for case in ("case vec:", "case odd2d:", "case 3d:", "case half:", "inputs[0] x: float16 [33, 70]"):
            assert case in prompt, case
    if policy == "none":
        assert all("No memory items are shown" in p for p in prompts)


def test_header_essentials_keep_declarations_and_drop_bodies() -> None:
    source = ("#ifndef X_H\n#define X_H\n/* doc */\ntypedef struct t { int a; } t;\n"
              "static inline int twice(int v) {\n    return 2 * v;\n}\n#endif\n")
    assert header_essentials(source) == "/* doc */\ntypedef struct t { int a; } t;\nstatic inline int twice(int v);"
    assert "return 2" not in kernel_contract("cpu") and "ks_numel(const ks_tensor* t);" in kernel_contract("cpu")
    compact = kernel_contract("cpu", True)
    assert "int ks_kernel(" in compact and len(compact) < len(kernel_contract("cpu"))
    assert "documents no ABI header" in kernel_contract("no_such_backend")


def test_a_shrunk_contract_keeps_the_rules_and_a_case_of_every_dtype(suite) -> None:
    from kernelsage.graph.nodes.contract import cases_shown, task_interface
    from kernelsage.tasks.loaders import find_task

    compact = kernel_contract("cpu", True)
    assert "every element must be written" in compact and "Return 0 on success" in compact
    assert "kernel ABI, version 1" not in compact  # the prose before the rules is what shrinking drops
    relu = find_task(suite, "l1_relu")  # three float32 cases, then a float16 one
    assert "x: float16 [33, 70]" in task_interface(relu, compact=True)
    shown = cases_shown(relu.cases, 1)
    assert {case.dtype for case in shown} == {"float32", "float16"}  # every dtype, whatever the limit
    assert [c.name for c in cases_shown(relu.cases, 3)] == [relu.cases[i].name for i in (0, 1, 3)]  # in order
