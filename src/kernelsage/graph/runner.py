"""Running one episode: the input, the run-time context and a clearly named, traceable config."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from kernelsage.graph.context import Context
from kernelsage.graph.runner_events import emit, episode_started, step_events


def new_episode_id(task_id: str) -> str:
    return f"{task_id}-{uuid.uuid4().hex[:12]}"


def episode_config(*, task_id: str, level: int | None, episode_id: str, context: Context, backend: str, model: str,
                   thread_id: str | None = None, callbacks: list[BaseCallbackHandler] | None = None) -> RunnableConfig:
    """The episode's run name, tags and metadata; every node and model run below inherits them.

    LangSmith sees them when LANGSMITH_TRACING is set; otherwise nothing is sent and nothing is paid.
    """
    metadata = {"operator": task_id, "level": level, "episode_id": episode_id, "policy": context.policy,
                "namespace": context.namespace, "backend": backend, "model": model, "budget": context.budget}
    config = RunnableConfig(
        run_name=f"kernelsage episode {task_id}",
        tags=["kernelsage", f"policy:{context.policy}", f"backend:{backend}", f"level:{level}"],
        metadata=metadata,
        configurable={"thread_id": thread_id or episode_id},
        recursion_limit=20 * context.budget + 50,  # ~6 steps per round, with room for failed rounds
    )
    if callbacks:
        config["callbacks"] = callbacks
    return config


def run_episode(graph: CompiledStateGraph, *, task_id: str, level: int | None, context: Context, backend: str,
                model: str, episode_id: str | None = None, thread_id: str | None = None,
                callbacks: list[BaseCallbackHandler] | None = None,
                on_state: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run (or, with a checkpointer and the same thread id, resume) one episode; returns the final state.

    `on_state` sees the state after every step (for progress displays), and the `kernelsage.events` logger
    hears the episode start, each round's verdict and the memory's commit (runner_events). A thread that
    already finished is not run again: its final state is returned as it was.
    """
    episode_id = episode_id or new_episode_id(task_id)
    config = episode_config(task_id=task_id, level=level, episode_id=episode_id, context=context, backend=backend,
                            model=model, thread_id=thread_id, callbacks=callbacks)
    snapshot = graph.get_state(config) if graph.checkpointer is not None else None
    if snapshot is not None and snapshot.values and not snapshot.next:
        return dict(snapshot.values)  # finished before: its memory effects happened once already
    resuming = snapshot is not None and bool(snapshot.next)
    payload = None if resuming else {"task_id": task_id, "episode_id": episode_id}
    emit(episode_started(task_id=task_id, level=level, episode_id=episode_id, policy=context.policy,
                         resumed=resuming))
    previous: dict[str, Any] = dict(snapshot.values) if resuming else {}  # rounds said before are not said again
    final: dict[str, Any] = {}
    for final in graph.stream(payload, config=config, context=context, stream_mode="values"):
        for event in step_events(previous, final):
            emit(event)
        previous = final
        if on_state is not None:
            on_state(final)
    return final
