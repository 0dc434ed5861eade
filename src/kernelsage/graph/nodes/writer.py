"""What the generator and the optimizer share: ask for a candidate, parse it strictly, re-ask on bad format.

What can go wrong in a round, and what the round records when the re-asks do not fix it:
- `parse_error`: the answer breaks the format; the re-ask repeats it only up to MAX_ECHO_CHARS;
- `truncated`: the answer stopped at the output limit; the re-ask asks for a shorter answer and does
  not repeat the cut one;
- `model_error`: the call failed (the endpoint gave up after retries, rejected the request, answered
  garbage); the reason is kept in `detail`. A prompt that overflows the model's window (the server's
  answer, or the configured `KERNELSAGE_MODEL_CONTEXT`) is shrunk once (`compact=True`) before that.
A `ModelError` that no round can absorb (authentication, unknown model) propagates: the stream stops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.runtime import Runtime

from kernelsage.errors import ContextOverflowError, ModelCallError, ParseError
from kernelsage.graph.context import Context
from kernelsage.graph.nodes.bounds import MAX_ECHO_CHARS, bound_middle
from kernelsage.graph.nodes.model_calls import (
    call_model,
    fits_window,
    is_truncated,
    prompt_tokens,
    run_config,
    text_of,
)
from kernelsage.graph.nodes.prompting import system_message
from kernelsage.graph.records import Attempt, PendingCandidate, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, shown_items, stage_of
from kernelsage.models.factory import model_name
from kernelsage.models.limits import MODEL_MAX_TOKENS_ENV, ModelLimits
from kernelsage.models.turns import alternating
from kernelsage.parsing import format_parse_feedback, parse_answer
from kernelsage.tools.backend import files_to_write


def failed_round(round_no: int, state: EpisodeState, status: str, detail: str,
                 tokens: int | None = None) -> dict[str, Any]:
    """A round that produced nothing to evaluate still spends budget and is recorded."""
    return as_state(Attempt(round=round_no, stage=stage_of(state), status=status, detail=detail,
                            prompt_tokens=tokens))


def truncation_feedback() -> str:
    limit = ModelLimits.from_env().max_tokens
    return (f"Your previous answer was cut off at the output limit ({limit} tokens) and could not be used. "
            "Answer again, shorter: only the complete kernel file and the adoption block, no explanations, "
            "no commented-out code.")


class PromptBuilder(Protocol):
    def __call__(self, state: EpisodeState, resources: AgentResources, *, compact: bool = False) -> str: ...


def write_candidate(*, role: str, model: BaseChatModel, resources: AgentResources, state: EpisodeState,
                    context: Context, prompt: str, compact_prompt: Callable[[], str] | None = None) -> dict[str, Any]:
    """Ask `model` for a candidate; a malformed or cut-off answer is asked again, a bounded number of
    times. Returns the state update: the pending candidate, or a failed round (see the module docstring)."""
    shown_ids = [item.id for item in shown_items(state)]
    expected = files_to_write(resources.backend, resources.tasks(state["task_id"]))
    system = system_message(resources.backend.name)
    base: list[BaseMessage] = [system, HumanMessage(prompt)]
    shrunk = False
    if compact_prompt is not None and not fits_window(base):
        base, shrunk = [system, HumanMessage(compact_prompt())], True
    messages = base
    round_no = state.get("round", 0) + 1
    config = run_config(state, role, model_name(model), round_no=round_no)
    status, detail, tokens = "parse_error", "", None
    asks = 0
    while asks <= context.max_parse_retries:
        try:
            answer = call_model(model, messages, config)
        except ContextOverflowError as exc:
            if shrunk or compact_prompt is None:
                status, detail = "model_error", f"{exc} (the prompt was already shrunk)" if shrunk else str(exc)
                break
            base, shrunk = [system, HumanMessage(compact_prompt())], True
            messages = base
            continue
        except ModelCallError as exc:
            status, detail = "model_error", str(exc)
            break
        asks += 1
        tokens = prompt_tokens(answer, messages)
        if is_truncated(answer):
            status, detail = "truncated", f"the answer was cut off at the output limit (raise {MODEL_MAX_TOKENS_ENV})"
            # The cut answer is not sent back, so the request joins the prompt's user turn: two user turns
            # in a row are rejected by strict chat templates (kernelsage.models.turns).
            messages = alternating([*base, HumanMessage(truncation_feedback())])
            continue
        try:
            parsed = parse_answer(text_of(answer), expected_files=expected, shown_ids=shown_ids)
        except ParseError as exc:
            status, detail = "parse_error", f"the answer could not be parsed: {exc}"
            echo = AIMessage(content=bound_middle(text_of(answer), MAX_ECHO_CHARS))
            messages = [*base, echo, HumanMessage(format_parse_feedback(exc))]
            continue
        pending = PendingCandidate(files=dict(parsed.files), adoption=dict(parsed.adoption), prompt_tokens=tokens)
        return {"round": round_no, "pending": as_state(pending)}
    return {"round": round_no, "pending": None, "attempts": [failed_round(round_no, state, status, detail, tokens)]}


def make_writer_node(role: str, build_prompt: PromptBuilder, resources: AgentResources) -> Callable[..., dict[str, Any]]:
    """A node that asks the role's model for a candidate built from `build_prompt`."""
    model = resources.models.for_role(role)

    def write(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        prompt = build_prompt(state, resources)
        return write_candidate(role=role, model=model, resources=resources, state=state,
                               context=resources.settings(runtime), prompt=prompt,
                               compact_prompt=lambda: build_prompt(state, resources, compact=True))

    write.__name__ = role
    return write
