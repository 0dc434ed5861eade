"""Where a command's work goes on the cluster: its own actors on the driver's node, its streams spread.

The board, the device pool and the gates hold the run's state and have no restarts: on the driver's node
(which the run cannot outlive anyway) a lost worker node never takes them. Streams go wherever there is
room, spread over the nodes, so a lost node takes only some of them and the others keep going.
"""

from __future__ import annotations

from typing import Any

SPREAD = "SPREAD"  # Ray's strategy that places tasks across nodes rather than filling the driver's first


def this_node(ray: Any) -> str:
    """The id of the node this process (the driver, a worker) is attached to."""
    return str(ray.get_runtime_context().get_node_id())


def pinned_to(node: str | None) -> dict[str, Any]:
    """Ray options that keep an actor on `node` (failing rather than moving it); none when `node` is None."""
    if node is None:
        return {}
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}
