"""Calling the role's model: retries for transient faults, and names and metadata for tracing."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from kernelsage.graph.state import EpisodeState, stage_of
from kernelsage.models.retry import invoke_with_retry


def run_config(state: EpisodeState, role: str, model_name: str) -> RunnableConfig:
    """Names and metadata of a model call, for tracing (free when tracing is off)."""
    return RunnableConfig(
        run_name=f"{role} round {state.get('round', 0)}",
        tags=[f"role:{role}", f"stage:{stage_of(state)}"],
        metadata={"role": role, "round": state.get("round", 0), "stage": stage_of(state),
                  "operator": state.get("operator", state["task_id"]), "episode_id": state.get("episode_id"),
                  "model": model_name},
    )


def call_model(model: BaseChatModel, messages: list[BaseMessage], config: RunnableConfig) -> AIMessage:
    """One model call with retries for transient faults; the answer as an AIMessage."""
    answer = invoke_with_retry(model, messages, config=config)
    return answer if isinstance(answer, AIMessage) else AIMessage(content=str(answer))


def text_of(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
