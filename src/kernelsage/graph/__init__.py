"""The episode graph: state schema and records, run-time context, routing, the nodes and the graph factory.

The public names below are imported on first use (PEP 562), so reading records (`kernelsage.graph.records`,
as reports do) never loads LangGraph, the model stack or the nodes.
"""

from __future__ import annotations

from kernelsage.lazy_exports import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
