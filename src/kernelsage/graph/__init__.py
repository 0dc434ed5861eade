"""The episode graph: state schema, run-time context, routing and the graph factory."""

from kernelsage.graph.builder import build_graph
from kernelsage.graph.context import Context
from kernelsage.graph.resources import AgentModels
from kernelsage.graph.state import EpisodeState

__all__ = ["AgentModels", "Context", "EpisodeState", "build_graph"]
