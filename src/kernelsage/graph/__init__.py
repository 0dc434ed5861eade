"""The episode graph: state schema and records, run-time context, routing, the nodes and the graph factory."""

from kernelsage.graph.builder import EPISODE_NODES, INSERTION_POINTS, add_episode, build_graph
from kernelsage.graph.context import Context
from kernelsage.graph.records import Attempt, EpisodeOutcome, MemoryUpdate, PendingCandidate, PromptItem
from kernelsage.graph.resources import AgentModels, AgentResources
from kernelsage.graph.state import EpisodeState

__all__ = [
    "EPISODE_NODES", "INSERTION_POINTS", "AgentModels", "AgentResources", "Attempt", "Context", "EpisodeOutcome",
    "EpisodeState", "MemoryUpdate", "PendingCandidate", "PromptItem", "add_episode", "build_graph",
]
