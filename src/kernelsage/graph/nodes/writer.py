"""What the generator and the optimizer share: ask for a candidate, parse it strictly, re-ask on bad format."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from kernelsage.errors import ParseError
from kernelsage.graph.context import Context
from kernelsage.graph.nodes.common import call_model, run_config, text_of
from kernelsage.graph.nodes.common import render as render_prompt
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import Attempt, EpisodeState
from kernelsage.models.factory import model_name
from kernelsage.parsing import ANSWER_FORMAT, format_parse_feedback, parse_answer


def candidate_files(resources: AgentResources) -> tuple[str, ...]:
    """The source files the backend expects a candidate to consist of."""
    return tuple(resources.backend.candidate_files)


def system_message(resources: AgentResources) -> SystemMessage:
    return SystemMessage(render_prompt("system", backend=resources.backend.name, answer_format=ANSWER_FORMAT))


def failed_round(round_no: int, state: EpisodeState, status: str, detail: str) -> Attempt:
    """A round that produced nothing to evaluate still spends budget and is recorded."""
    return Attempt(round=round_no, stage=state.get("stage", "draft"), candidate_hash="",
                   files={}, status=status, correct=False, latency=None, reference_latency=None, compile=None,
                   verify={"message": detail}, profile=None, adopted=[])


def write_candidate(*, role: str, model: BaseChatModel, resources: AgentResources, state: EpisodeState,
                    context: Context, prompt: str) -> dict[str, Any]:
    """Ask `model` for a candidate; a malformed answer is asked again with the parse error, a bounded
    number of times. Returns the state update: the pending candidate, or a failed round."""
    shown_ids = [item["id"] for item in state.get("shown", [])]
    messages: list[BaseMessage] = [system_message(resources), HumanMessage(prompt)]
    config = run_config(state, role, model_name(model))
    error: ParseError | None = None
    for _ in range(context.max_parse_retries + 1):
        answer = call_model(model, messages, config)
        try:
            parsed = parse_answer(text_of(answer), expected_files=candidate_files(resources), shown_ids=shown_ids)
        except ParseError as exc:
            error = exc
            messages += [answer, HumanMessage(format_parse_feedback(exc))]
            continue
        adoption = {str(i): {"adopted": r.adopted, "rationale": r.rationale} for i, r in parsed.adoption.items()}
        return {"round": state.get("round", 0) + 1,
                "pending": {"files": dict(parsed.files), "adoption": adoption, "asks": 0}}
    return {"round": state.get("round", 0) + 1, "pending": None,
            "attempts": [failed_round(state.get("round", 0) + 1, state, "parse_error",
                                      f"the answer could not be parsed: {error}")]}


PromptBuilder = Callable[[EpisodeState, AgentResources, str], str]


def make_writer_node(role: str, build_prompt: PromptBuilder, resources: AgentResources,
                     interface: Callable[[str], str]) -> Callable[..., dict[str, Any]]:
    """A node that asks the role's model for a candidate built from `build_prompt`."""
    model = resources.models.for_role(role)

    def write(state: EpisodeState, runtime: Runtime[Context]) -> dict[str, Any]:
        prompt = build_prompt(state, resources, interface(state["task_id"]))
        return write_candidate(role=role, model=model, resources=resources, state=state, context=runtime.context,
                               prompt=prompt)

    write.__name__ = role
    return write
