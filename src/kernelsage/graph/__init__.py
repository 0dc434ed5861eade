"""The episode graph: state schema and records, run-time context, routing, the nodes and the graph factory.

The public names below are imported on first use (PEP 562), so reading records (`kernelsage.graph.records`,
as reports do) never loads LangGraph, the model stack or the nodes.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "EPISODE_NODES": "builder", "INSERTION_POINTS": "builder", "add_episode": "builder", "build_graph": "builder",
    "Context": "context",
    "Attempt": "records", "EpisodeOutcome": "records", "MemoryUpdate": "records", "PendingCandidate": "records",
    "PromptItem": "records",
    "AgentModels": "resources", "AgentResources": "resources",
    "EpisodeState": "state",
}
__all__ = [  # the keys of _WHERE, spelt out for linters and type checkers
    "EPISODE_NODES", "INSERTION_POINTS", "AgentModels", "AgentResources", "Attempt", "Context", "EpisodeOutcome",
    "EpisodeState", "MemoryUpdate", "PendingCandidate", "PromptItem", "add_episode", "build_graph",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
