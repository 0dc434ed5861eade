"""diagnostician: after a failure, the model studies the evidence with diagnosis tools and writes a
diagnosis that the next draft, the next retrieval and the curator use.

The step is advisory: when its model call fails the episode goes on without a diagnosis. Tool arguments
that do not fit a tool's schema (or a tool that fails) are answered as that tool's output, so the model
can correct itself. The diagnosis and every tool output are bounded (`bounds`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, ToolException
from langgraph.runtime import Runtime
from pydantic import ValidationError

from kernelsage.errors import KernelsageError, ModelCallError
from kernelsage.graph.nodes.bounds import MAX_DIAGNOSIS_CHARS, MAX_SUMMARY_CHARS, MAX_TOOL_OUTPUT_CHARS, bound
from kernelsage.graph.nodes.contract import kernel_contract, task_interface
from kernelsage.graph.nodes.model_calls import call_model, run_config, text_of
from kernelsage.graph.nodes.prompting import code_blocks, render, summarise_attempt, system_message
from kernelsage.graph.records import Attempt
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, attempts
from kernelsage.models.factory import model_name
from kernelsage.tools.agent_tools import KernelSession, make_kernel_tools
from kernelsage.tools.diagnostics import by_severity, describe_mismatch, mismatch_statistics
from kernelsage.tools.redaction import redact

MAX_TOOL_ROUNDS = 4  # tool calls before the model must answer
log = logging.getLogger(__name__)


def evidence_of(attempt: Attempt) -> str:
    """The failure as the backend reported it: compiler messages (errors first), the first failing case's
    statistics and elements, stderr."""
    lines = [summarise_attempt(attempt)]
    evaluation = attempt.evaluation
    if evaluation is None:
        return lines[0]
    for message in by_severity(evaluation.compile.errors)[:8]:
        lines.append(bound(f"{message.file}:{message.line}:{message.column}: {message.severity}: {message.message}",
                           MAX_SUMMARY_CHARS))
    verify = evaluation.verify
    failure = verify.first_failure() if verify else None
    if failure is not None and failure.n_elements:
        lines.append(f"case {failure.case} trial {failure.trial}: {failure.status.value}, "
                     + "; ".join(mismatch_statistics(failure)))
        lines += [f"  {describe_mismatch(m)}" for m in failure.mismatches[:5]]
    elif failure is not None:
        lines.append(f"case {failure.case} trial {failure.trial}: {failure.status.value}: {failure.message}")
    if verify is not None and verify.stderr_tail:
        lines.append("stderr: " + verify.stderr_tail[-800:])
    return "\n".join(lines)


def session_for(attempt: Attempt) -> KernelSession:
    """The tools start from the failed candidate's results, so the model can inspect them at once."""
    evaluation = attempt.evaluation
    if evaluation is None:
        return KernelSession()
    return KernelSession(compiled=evaluation.compile, verified=evaluation.verify, profiled=evaluation.profile)


def run_tool(tool: BaseTool | None, name: str, args: object) -> str:
    """A tool's output, or what went wrong as the output (bad arguments, a failing tool, an unknown name)."""
    if tool is None:
        return f"error: there is no tool {name!r}"
    try:
        return str(tool.invoke(args))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()[:5])
        return f"error: the arguments do not fit {name}'s schema ({problems}); call it again with valid arguments"
    except (ToolException, KernelsageError, TypeError, ValueError) as exc:
        return f"error: {name} failed: {type(exc).__name__}: {exc}"


def make_diagnostician_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    model = resources.models.for_role("diagnostician")

    def diagnostician(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        attempt = attempts(state)[-1]
        task = resources.tasks(state["task_id"])
        tools = make_kernel_tools(resources.backend, task, session_for(attempt))
        by_name = {t.name: t for t in tools}
        prompt = render("diagnostician", task_id=task.id, description=task.description,
                        backend=resources.backend.name, contract=kernel_contract(resources.backend),
                        interface=task_interface(task), round=attempt.round,
                        code=code_blocks(attempt.files) or "(no code)",
                        status=attempt.status, evidence=evidence_of(attempt))
        messages: list[BaseMessage] = [system_message(resources.backend.name), HumanMessage(prompt)]
        config = run_config(state, "diagnostician", model_name(model))
        bound_model = model.bind_tools(tools)
        diagnosis = ""
        for _ in range(MAX_TOOL_ROUNDS + 1):
            try:
                answer = call_model(bound_model, messages, config)
            except ModelCallError as exc:  # advisory: the episode goes on without a diagnosis
                log.warning("diagnostician: no diagnosis for round %s: %s", attempt.round, exc)
                return {"diagnosis": None}
            messages.append(answer)
            if not answer.tool_calls:
                diagnosis = text_of(answer).strip()
                break
            for call in answer.tool_calls:
                output = run_tool(by_name.get(call["name"]), call["name"], call["args"])
                messages.append(ToolMessage(content=bound(redact(output), MAX_TOOL_OUTPUT_CHARS),
                                            tool_call_id=call["id"] or call["name"]))
        diagnosis = diagnosis or f"The last candidate failed with {attempt.status}; see the evidence."
        return {"diagnosis": bound(diagnosis, MAX_DIAGNOSIS_CHARS)}

    return diagnostician
