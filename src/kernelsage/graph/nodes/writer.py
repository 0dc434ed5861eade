"""What the generator and the optimizer share: ask for a candidate, parse it strictly, re-ask on bad format."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.runtime import Runtime

from kernelsage.errors import ParseError
from kernelsage.graph.context import Context
from kernelsage.graph.nodes.model_calls import call_model, run_config, text_of
from kernelsage.graph.nodes.prompting import system_message
from kernelsage.graph.records import Attempt, PendingCandidate, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, shown_items, stage_of
from kernelsage.models.factory import model_name
from kernelsage.parsing import format_parse_feedback, parse_answer


def failed_round(round_no: int, state: EpisodeState, status: str, detail: str) -> dict[str, Any]:
    """A round that produced nothing to evaluate still spends budget and is recorded."""
    return as_state(Attempt(round=round_no, stage=stage_of(state), status=status, detail=detail))


def write_candidate(*, role: str, model: BaseChatModel, resources: AgentResources, state: EpisodeState,
                    context: Context, prompt: str) -> dict[str, Any]:
    """Ask `model` for a candidate; a malformed answer is asked again with the parse error, a bounded
    number of times. Returns the state update: the pending candidate, or a failed round."""
    shown_ids = [item.id for item in shown_items(state)]
    messages: list[BaseMessage] = [system_message(resources.backend.name), HumanMessage(prompt)]
    config = run_config(state, role, model_name(model))
    round_no = state.get("round", 0) + 1
    error: ParseError | None = None
    for _ in range(context.max_parse_retries + 1):
        answer = call_model(model, messages, config)
        try:
            parsed = parse_answer(text_of(answer), expected_files=resources.backend.candidate_files,
                                  shown_ids=shown_ids)
        except ParseError as exc:
            error = exc
            messages += [answer, HumanMessage(format_parse_feedback(exc))]
            continue
        pending = PendingCandidate(files=dict(parsed.files), adoption=dict(parsed.adoption))
        return {"round": round_no, "pending": as_state(pending)}
    return {"round": round_no, "pending": None,
            "attempts": [failed_round(round_no, state, "parse_error", f"the answer could not be parsed: {error}")]}


PromptBuilder = Callable[[EpisodeState, AgentResources], str]


def make_writer_node(role: str, build_prompt: PromptBuilder, resources: AgentResources) -> Callable[..., dict[str, Any]]:
    """A node that asks the role's model for a candidate built from `build_prompt`."""
    model = resources.models.for_role(role)

    def write(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        prompt = build_prompt(state, resources)
        return write_candidate(role=role, model=model, resources=resources, state=state,
                               context=resources.settings(runtime), prompt=prompt)

    write.__name__ = role
    return write
