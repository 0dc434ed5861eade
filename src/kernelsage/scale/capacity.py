"""Whether a cluster can hold a run before it starts, and why a stream waits once it has.

A stream needs a quarter of a CPU on one node, an evaluator of the cpu backend a whole CPU: when the
evaluators take the CPUs no stream can start, and Ray would wait for one in silence. The check places
the evaluators node by node, as Ray must (a sum of fractions over several nodes places nothing), and says
what to change in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from kernelsage.scale.devices import DevicePlan

EPSILON = 1e-9  # Ray's resources are fixed-point numbers; a quarter CPU left is a quarter CPU
MORE_CPUS = "`ray start --num-cpus N` on a cluster's nodes"  # how a joined cluster gets CPUs


@dataclass(frozen=True)
class Node:
    """A live node of the cluster and what it offers (Ray's names: CPU, GPU, NPU, ...)."""

    id: str
    resources: dict[str, float]


def alive_nodes(nodes: list[dict[str, Any]]) -> list[Node]:
    """The live nodes of `ray.nodes()`."""
    return [Node(str(n["NodeID"]), {k: float(v) for k, v in (n.get("Resources") or {}).items()})
            for n in nodes if n.get("Alive")]


def evaluator_needs(plan: DevicePlan) -> dict[str, float]:
    """What one evaluator of the plan holds, by Ray's resource names."""
    options = plan.resources
    needs = {"CPU": float(options.get("num_cpus", 0)), "GPU": float(options.get("num_gpus", 0)),
             **{k: float(v) for k, v in (options.get("resources") or {}).items()}}
    return {k: v for k, v in needs.items() if v > 0}


def _fits(free: dict[str, float], needs: dict[str, float]) -> bool:
    return all(free.get(k, 0.0) + EPSILON >= v for k, v in needs.items())


def evaluator_home(nodes: list[Node], plan: DevicePlan, driver: str) -> str | None:
    """The node the evaluators are kept on: the driver's, when they hold CPUs and it holds them all (a lost
    worker node then takes no evaluator, and none restarts on a CPU a surviving node's streams need);
    None (Ray places them) for evaluators on devices, or when the driver's node is too small."""
    needs = evaluator_needs(plan)
    if "CPU" not in needs:
        return None
    home = next((n for n in nodes if n.id == driver), None)
    total = {k: v * plan.count for k, v in needs.items()}
    return driver if home is not None and _fits(home.resources, total) else None


def _left_after_evaluators(nodes: list[Node], plan: DevicePlan | None, home: str | None) -> dict[str, dict] | None:
    """What each node has left once the evaluators are placed (on `home`, else where most CPU is left);
    None when they do not all fit."""
    free = {n.id: dict(n.resources) for n in nodes}
    needs = evaluator_needs(plan) if plan is not None else {}
    for _ in range(plan.count if plan is not None else 0):
        fits = [node for node in ([home] if home else free) if node in free and _fits(free[node], needs)]
        if not fits:
            return None
        chosen = max(fits, key=lambda node: free[node].get("CPU", 0.0))
        for key, value in needs.items():
            free[chosen][key] -= value
    return free


def capacity_problem(nodes: list[Node], plan: DevicePlan | None, stream_cpus: float,
                     home: str | None = None) -> str | None:
    """Why this cluster cannot hold the evaluators of `plan` (kept on `home` when given) and at least one
    stream of `stream_cpus` CPUs on one node, in one line that says what to change; None when it can."""
    free = _left_after_evaluators(nodes, plan, home)
    if free is not None and any(f.get("CPU", 0.0) + EPSILON >= stream_cpus for f in free.values()):
        return None
    total = sum(n.resources.get("CPU", 0.0) for n in nodes)
    held = evaluator_needs(plan).get("CPU", 0.0) * plan.count if plan is not None else 0.0
    if held == 0:
        return (f"no stream can start on this Ray cluster: no node has the {stream_cpus:g} CPU a stream needs "
                f"({total:g} CPUs in all); give it CPUs (--ray-cpus with --ray local, {MORE_CPUS})")
    assert plan is not None
    fewer = next((k for k in range(plan.count - 1, 0, -1)
                  if capacity_problem(nodes, replace(plan, count=k), stream_cpus, home) is None), None)
    fixes = [f"--eval-slots {fewer}"] if fewer else []
    local_cpus = math.ceil(held + stream_cpus - EPSILON)
    fixes.append(f"more CPUs (--ray-cpus {local_cpus} or more with --ray local, {MORE_CPUS})")
    where = "the driver's node" if home else "the cluster"
    offered = next((n.resources.get("CPU", 0.0) for n in nodes if n.id == home), total)
    what = "no stream can start on this Ray cluster" if free is not None else "the evaluators do not fit this Ray cluster"
    return (f"{what}: the cpu backend's evaluator slots (--eval-slots {plan.count}) hold a whole CPU each, "
            f"{held:g} of the {offered:g} CPUs of {where}, and a stream needs {stream_cpus:g} CPU on one node; "
            f"give {' or '.join(fixes)}")


def waiting_reason(available_cpus: float, total_cpus: float, evaluator_cpus: float, stream_cpus: float) -> str:
    """Why a stream has not started yet, from the cluster's CPUs now: none free (and who holds them), or a
    Ray worker still starting for it."""
    if available_cpus + EPSILON >= stream_cpus:
        return "waiting for its Ray worker to start"
    streams = max(0.0, total_cpus - available_cpus - evaluator_cpus)
    return (f"waiting for a CPU: evaluators hold {evaluator_cpus:g} of {total_cpus:g}, running streams "
            f"{streams:g}")
