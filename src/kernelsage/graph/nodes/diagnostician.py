"""diagnostician: after a failure, the model studies the evidence with diagnosis tools and writes a
diagnosis that the next draft, the next retrieval and the curator use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from kernelsage.graph.context import Context
from kernelsage.graph.nodes.common import call_model, render, run_config, summarise_attempt, text_of
from kernelsage.graph.nodes.writer import system_message
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import Attempt, EpisodeState
from kernelsage.models.factory import model_name

MAX_TOOL_ROUNDS = 4  # tool calls before the model must answer


def evidence_of(attempt: Attempt) -> str:
    """The failure as the backend reported it: compiler errors, first mismatches, stderr."""
    lines = [summarise_attempt(attempt)]
    for error in ((attempt.get("compile") or {}).get("errors") or [])[:8]:
        lines.append(f"{error['file']}:{error['line']}:{error['column']}: {error['severity']}: {error['message']}")
    verify = attempt.get("verify") or {}
    failure = verify.get("first_failure")
    if failure:
        lines.append(
            f"case {failure['case']} trial {failure['trial']}: {failure['status']}, {failure['n_mismatch']} of "
            f"{failure['n_elements']} elements wrong ({failure['n_unwritten']} never written), max abs error "
            f"{failure['max_abs_error']:.3g}, max rel error {failure['max_rel_error']:.3g}")
        for mismatch in failure.get("mismatches", [])[:5]:
            lines.append(f"  output {mismatch['output']} index {mismatch['index']}: expected {mismatch['expected']}"
                         f" got {mismatch['actual']}")
    if verify.get("stderr_tail"):
        lines.append("stderr: " + verify["stderr_tail"][-800:])
    return "\n".join(lines)


def _session_for(attempt: Attempt) -> Any:
    """The tools start from the failed candidate's results, so the model can inspect them at once."""
    from kernelsage.tools.agent_tools import KernelSession
    from kernelsage.tools.results import CaseResult, CompileResult, VerifyResult

    session = KernelSession()
    if attempt.get("compile"):
        session.compiled = CompileResult.model_validate(attempt["compile"])
    verify = attempt.get("verify") or {}
    if verify.get("status"):
        failure = verify.get("first_failure")
        session.verified = VerifyResult(
            status=verify["status"], correct=verify["correct"], trials=verify.get("trials", 0),
            message=verify.get("message", ""), stderr_tail=verify.get("stderr_tail", ""),
            cases=[CaseResult.model_validate(failure)] if failure else [],
        )
    return session


def make_diagnostician_node(resources: AgentResources,
                            interface: Callable[[str], str]) -> Callable[..., dict[str, Any]]:
    from kernelsage.tools.agent_tools import make_kernel_tools

    model = resources.models.for_role("diagnostician")

    def diagnostician(state: EpisodeState, runtime: Runtime[Context]) -> dict[str, Any]:
        attempt = state["attempts"][-1]
        task = resources.tasks(state["task_id"])
        tools = make_kernel_tools(resources.backend, task, _session_for(attempt))
        by_name = {t.name: t for t in tools}
        code = "\n\n".join(f"```cpp file={n}\n{s}\n```" for n, s in attempt["files"].items()) or "(no code)"
        prompt = render("diagnostician", task_id=task.id, description=task.description,
                        interface=interface(task.id), round=attempt["round"], code=code,
                        status=attempt["status"], evidence=evidence_of(attempt))
        messages: list[BaseMessage] = [system_message(resources), HumanMessage(prompt)]
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
                messages.append(ToolMessage(content=str(output), tool_call_id=call["id"] or call["name"]))
        return {"diagnosis": diagnosis or f"The last candidate failed with {attempt['status']}; see the evidence."}

    return diagnostician
