"""diagnostician: after a failure, the model studies the evidence with diagnosis tools and writes a
diagnosis that the next draft, the next retrieval and the curator use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from kernelsage.graph.nodes.model_calls import call_model, run_config, text_of
from kernelsage.graph.nodes.prompting import code_blocks, render, summarise_attempt, system_message
from kernelsage.graph.records import Attempt
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, attempts
from kernelsage.models.factory import model_name
from kernelsage.tools.agent_tools import KernelSession, make_kernel_tools
from kernelsage.tools.redaction import redact

MAX_TOOL_ROUNDS = 4  # tool calls before the model must answer


def evidence_of(attempt: Attempt) -> str:
    """The failure as the backend reported it: compiler errors, first mismatches, stderr."""
    lines = [summarise_attempt(attempt)]
    evaluation = attempt.evaluation
    if evaluation is None:
        return lines[0]
    for error in evaluation.compile.errors[:8]:
        lines.append(f"{error.file}:{error.line}:{error.column}: {error.severity}: {error.message}")
    verify = evaluation.verify
    failure = verify.first_failure() if verify else None
    if failure is not None:
        lines.append(
            f"case {failure.case} trial {failure.trial}: {failure.status.value}, {failure.n_mismatch} of "
            f"{failure.n_elements} elements wrong ({failure.n_unwritten} never written), max abs error "
            f"{failure.max_abs_error:.3g}, max rel error {failure.max_rel_error:.3g}")
        for mismatch in failure.mismatches[:5]:
            lines.append(f"  output {mismatch.output} index {mismatch.index}: expected {mismatch.expected}"
                         f" got {mismatch.actual}")
    if verify is not None and verify.stderr_tail:
        lines.append("stderr: " + verify.stderr_tail[-800:])
    return "\n".join(lines)


def session_for(attempt: Attempt) -> KernelSession:
    """The tools start from the failed candidate's results, so the model can inspect them at once."""
    evaluation = attempt.evaluation
    if evaluation is None:
        return KernelSession()
    return KernelSession(compiled=evaluation.compile, verified=evaluation.verify, profiled=evaluation.profile)


def make_diagnostician_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    model = resources.models.for_role("diagnostician")

    def diagnostician(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        attempt = attempts(state)[-1]
        task = resources.tasks(state["task_id"])
        tools = make_kernel_tools(resources.backend, task, session_for(attempt))
        by_name = {t.name: t for t in tools}
        prompt = render("diagnostician", task_id=task.id, description=task.description,
                        interface=resources.interface(task.id), round=attempt.round,
                        code=code_blocks(attempt.files) or "(no code)",
                        status=attempt.status, evidence=evidence_of(attempt))
        messages: list[BaseMessage] = [system_message(resources.backend.name), HumanMessage(prompt)]
        config = run_config(state, "diagnostician", model_name(model))
        bound = model.bind_tools(tools)
        diagnosis = ""
        for _ in range(MAX_TOOL_ROUNDS + 1):
            answer = call_model(bound, messages, config)
            messages.append(answer)
            if not answer.tool_calls:
                diagnosis = text_of(answer).strip()
                break
            for call in answer.tool_calls:
                tool = by_name.get(call["name"])
                output = tool.invoke(call["args"]) if tool else f"unknown tool {call['name']!r}"
                messages.append(ToolMessage(content=redact(str(output)), tool_call_id=call["id"] or call["name"]))
        return {"diagnosis": diagnosis or f"The last candidate failed with {attempt.status}; see the evidence."}

    return diagnostician
