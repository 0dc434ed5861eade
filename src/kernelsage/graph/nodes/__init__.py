"""The episode's nodes, one module each: build the prompt, call the model, parse, return a state update.

Each `make_*_node(resources)` returns a node function `(state, runtime) -> update`, so a host can rewire
them into a builder of its own.
"""

from kernelsage.graph.nodes.adoption_gate import make_adoption_gate_node
from kernelsage.graph.nodes.curator import make_curator_node
from kernelsage.graph.nodes.diagnostician import make_diagnostician_node
from kernelsage.graph.nodes.evaluate import make_evaluate_node
from kernelsage.graph.nodes.finish import finish
from kernelsage.graph.nodes.generator import make_generator_node
from kernelsage.graph.nodes.optimizer import make_optimizer_node
from kernelsage.graph.nodes.retrieve import make_retrieve_node
from kernelsage.graph.nodes.start import make_start_node
from kernelsage.graph.nodes.tune import make_tune_node

__all__ = [
    "finish", "make_adoption_gate_node", "make_curator_node", "make_diagnostician_node", "make_evaluate_node",
    "make_generator_node", "make_optimizer_node", "make_retrieve_node", "make_start_node", "make_tune_node",
]
