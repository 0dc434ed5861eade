"""Calling the role's model: retries for transient faults, names and metadata for tracing, and what an
answer says about itself (cut off at the output limit, tokens used)."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from kernelsage.errors import ContextOverflowError
from kernelsage.graph.state import EpisodeState, stage_of
from kernelsage.models.limits import (
    MODEL_CONTEXT_ENV,
    MODEL_MAX_TOKENS_ENV,
    WINDOW_MARGIN,
    ModelLimits,
    estimate_tokens,
    tokens_for_chars,
)
from kernelsage.models.retry import invoke_with_retry
from kernelsage.models.turns import alternating

TRUNCATED_FINISH_REASONS = ("length", "max_tokens")  # OpenAI-compatible servers; Anthropic


def run_config(state: EpisodeState, role: str, model_name: str, *, round_no: int | None = None) -> RunnableConfig:
    """Names and metadata of a model call, for tracing (free when tracing is off). `round_no` is the round the
    call belongs to; by default the last round done (a call that writes the next round passes its number)."""
    round_no = state.get("round", 0) if round_no is None else round_no
    return RunnableConfig(
        run_name=f"{role} round {round_no}",
        tags=[f"role:{role}", f"stage:{stage_of(state)}"],
        metadata={"role": role, "round": round_no, "stage": stage_of(state),
                  "operator": state.get("operator", state["task_id"]), "episode_id": state.get("episode_id"),
                  "model": model_name},
    )


def call_model(model: BaseChatModel, messages: list[BaseMessage], config: RunnableConfig) -> AIMessage:
    """One model call with retries for transient faults; the answer as an AIMessage.

    The conversation goes out with alternating turns (`kernelsage.models.turns`): strict chat templates
    reject two user turns in a row. Raises `ModelCallError` (the caller records it and goes on) or
    `ModelError` (nothing can go on); `ContextOverflowError`, before anything is sent, when the prompt
    cannot fit the configured window (`window_problem`)."""
    problem = window_problem(messages)
    if problem is not None:
        raise ContextOverflowError(problem)
    answer = invoke_with_retry(model, alternating(messages), config=config)
    return answer if isinstance(answer, AIMessage) else AIMessage(content=str(answer))


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


def is_truncated(answer: AIMessage) -> bool:
    """The answer stopped at the output limit (`finish_reason: length`): it is incomplete."""
    metadata = answer.response_metadata or {}
    reason = metadata.get("finish_reason") or metadata.get("stop_reason")
    return reason in TRUNCATED_FINISH_REASONS


def prompt_tokens(answer: AIMessage, messages: list[BaseMessage]) -> int:
    """The tokens the prompt took: as the server counted them, else a cautious estimate."""
    usage = answer.usage_metadata or {}
    counted = usage.get("input_tokens")
    return int(counted) if counted else sum(estimate_tokens(text_of(m)) for m in messages)


def fits_window(messages: list[BaseMessage]) -> bool:
    """Whether the prompt leaves room for the answer in the configured context window (always, when the
    window is not configured: then only the server's answer tells)."""
    return window_problem(messages) is None


def window_problem(messages: list[BaseMessage]) -> str | None:
    """Why the prompt cannot fit the configured window next to the output limit, naming the sizes; None
    when it fits or the window is not configured (`KERNELSAGE_MODEL_CONTEXT`)."""
    limits = ModelLimits.from_env()
    budget = limits.prompt_budget_chars()
    chars = sum(len(text_of(m)) for m in messages)
    if budget is None or chars <= budget:
        return None
    return (f"the prompt ({chars:,} characters, about {tokens_for_chars(chars):,} tokens) does not fit "
            f"{MODEL_CONTEXT_ENV}={limits.context_window} next to the output limit of {limits.max_tokens:,} "
            f"tokens ({MODEL_MAX_TOKENS_ENV}) with a {WINDOW_MARGIN:.0%} margin: it leaves room for about "
            f"{limits.prompt_budget_tokens():,} prompt tokens, so it was not sent; raise {MODEL_CONTEXT_ENV} if "
            f"the model's window is larger, or lower {MODEL_MAX_TOKENS_ENV}")
