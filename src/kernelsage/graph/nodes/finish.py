"""finish: the episode's result, fixed in the state (and the checkpoint) before memory changes."""

from __future__ import annotations

from typing import Any

from kernelsage.graph.state import EpisodeState


def episode_result(state: EpisodeState) -> dict[str, Any]:
    """Solved or not, first and best latency, speedups, counts: what evaluation reads."""
    attempts = state.get("attempts", [])
    first, best = state.get("first_correct"), state.get("best")
    compiled = [a for a in attempts if a["compile"] is not None]
    result: dict[str, Any] = {
        "task_id": state["task_id"], "episode_id": state.get("episode_id"), "level": state.get("level"),
        "solved": first is not None, "rounds": state.get("round", 0), "candidates": len(compiled),
        "compiled": sum(1 for a in compiled if a["compile"] and a["compile"].get("ok")),
        "first_correct_round": first["round"] if first else None,
        "t_first": first["latency"] if first else None, "t_best": best["latency"] if best else None,
        "t_reference": best["reference_latency"] if best else None,
    }
    if first and best and best["latency"]:
        result["self_speedup"] = first["latency"] / best["latency"]
        if best["reference_latency"]:
            result["speedup"] = best["reference_latency"] / best["latency"]
    return result


def finish(state: EpisodeState) -> dict[str, Any]:
    return {"outcome": {"result": episode_result(state)}}
