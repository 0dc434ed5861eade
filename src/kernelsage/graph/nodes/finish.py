"""finish: the episode's result, fixed in the state (and the checkpoint) before memory changes."""

from __future__ import annotations

from typing import Any

from kernelsage.graph.records import EpisodeOutcome, as_state
from kernelsage.graph.routing import episode_failure
from kernelsage.graph.state import EpisodeState, attempts


def finish(state: EpisodeState) -> dict[str, Any]:
    outcome = EpisodeOutcome.of(task_id=state["task_id"], episode_id=state.get("episode_id", ""),
                                level=state.get("level"), rounds=state.get("round", 0), attempts=attempts(state),
                                failure=episode_failure(state), tuning=state.get("tuning") or [])
    return {"result": as_state(outcome)}
