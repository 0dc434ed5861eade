"""The answers the demo's recording was made from. A SCRIPT, not a model: it is used only by
`python -m kernelsage.demo.record` to produce the recording that `kernelsage demo` replays."""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from kernelsage.demo.kernels import BROKEN_RELU, WRONG_ADD, example, first_draft
from kernelsage.parsing import AdoptionRecord, render_answer

DEMO_TASKS = ("l1_relu", "l1_add", "l2_softmax", "l2_add_rms_norm", "l3_matmul", "l3_topk")
# What the scripted engineer finds useful: the pack's advice on parallel loops, and the two lessons the
# stream itself teaches when they are relevant to the failure at hand.
ADOPTED_KNOWLEDGE = "Parallel loops and vectorisation"

LESSONS = {
    "fixed a compile error": "End every C++ statement with a semicolon and keep ks_kernel's exact signature.",
    "fixed a wrong result": "Check an elementwise kernel's arithmetic against the task's formula before tuning it.",
    "made it faster": "Parallelise the outermost independent loop with #pragma omp parallel for and keep the "
                      "inner loop contiguous so it vectorises.",
}
RULE = ("Parallelise the outermost independent loop with `#pragma omp parallel for` (add `if(n > 1 << 14)` for "
        "small inputs); keep inner loops contiguous and branch-free so they vectorise.")


def _text(messages: list[BaseMessage]) -> str:
    last = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    return str(last.content)


def _memory(messages: list[BaseMessage]) -> list[tuple[int, str]]:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            found = re.findall(r"^- id (\d+) \([^)]*\): (.*)$", str(message.content), re.MULTILINE)
            if found:
                return [(int(i), text) for i, text in found]
    return []


def _useful(text: str, prompt: str) -> bool:
    if ADOPTED_KNOWLEDGE in text or text == RULE:  # the pack's advice, or the rule it became
        return True
    if text.startswith(LESSONS["fixed a compile error"][:30]):
        return "compile_error" in prompt
    return text.startswith(LESSONS["fixed a wrong result"][:30]) and "wrong_result" in prompt


def _adoption(messages: list[BaseMessage]) -> dict[int, AdoptionRecord]:
    prompt = _text(messages)
    return {
        item_id: AdoptionRecord(adopted=True, rationale="I applied this to the structure of the kernel.")
        if _useful(text, prompt)
        else AdoptionRecord(adopted=False, rationale="Not needed for this operator's kernel.")
        for item_id, text in _memory(messages)
    }


def _candidate(task_id: str, round_no: int, stage: str) -> str:
    if task_id == "l1_relu" and round_no == 1:
        return BROKEN_RELU
    if task_id == "l1_add" and round_no == 1:
        return WRONG_ADD
    if stage == "draft":
        return first_draft(example(task_id))
    return example(task_id)


def demo_answer(messages: list[BaseMessage]) -> AIMessage:
    """Answer one request of the demo stream from its prompt."""
    prompt = _text(messages)
    writer = re.search(r"^# (?:Task|Make it faster: task) (\S+)", prompt, re.MULTILINE)
    if writer:
        round_no = int(re.search(r"Round (\d+) of", prompt).group(1))
        stage = "refine" if prompt.startswith("# Make it faster") else "draft"
        files = {"kernel.cpp": _candidate(writer.group(1), round_no, stage)}
        return AIMessage(content=render_answer(files, _adoption(messages)))
    if prompt.startswith("# Diagnose"):
        if not any(isinstance(m, ToolMessage) for m in messages):
            tool = "summarize_compiler_errors" if "compile_error" in prompt else "show_mismatches"
            return AIMessage(content="", tool_calls=[{"name": tool, "args": {}, "id": None}])
        if "compile_error" in prompt:
            return AIMessage(content="Line 4 lacks a semicolon after the input pointer declaration, so the "
                                     "declaration runs into the next line. Add the semicolon; the rest is right.")
        return AIMessage(content="Every element is wrong by 2b: the kernel subtracts b instead of adding it. "
                                 "Compute y = a + b in both the float32 and the float16 branch.")
    if prompt.startswith("Your answer did not give"):
        return AIMessage(content=render_answer({}, _adoption(messages)))
    if prompt.startswith("From this kernel-writing episode"):
        kinds = re.findall(r"^\d+\. It (fixed a compile error|fixed a wrong result|made it faster)\.", prompt,
                           re.MULTILINE)
        return AIMessage(content="\n".join(f"- {LESSONS[kind]}" for kind in kinds))
    if prompt.startswith("Rewrite this proven experience"):
        source = re.search(r"^Experience: (.*)$", prompt, re.MULTILINE)
        if source and ADOPTED_KNOWLEDGE in source.group(1):
            return AIMessage(content=RULE)
        return AIMessage(content=f"Rule: {source.group(1) if source else 'apply the proven change'}")
    raise ValueError(f"the demo script has no answer for: {prompt[:120]!r}")
