"""The lesson a tuning win teaches: the winning configuration against the declared default, with the gain the
paired profiles measured (pure). A tie, the default the fastest, or a tuning that failed teaches nothing."""

from __future__ import annotations

from typing import Any

from kernelsage.graph.state import EpisodeState
from kernelsage.memory_backend.items import NewItem
from kernelsage.tuning.space import describe

PROVENANCE = "tuned"


def tuning_lesson(record: dict[str, Any], *, operator: str, category: str, backend: str) -> NewItem | None:
    """The experience one tuning record (`TuningResult.to_dict()`) teaches, or None when its winner is the
    default (a tie keeps the default however large the gain it measured)."""
    winner, default, gain = record.get("winner"), record.get("default"), record.get("gain")
    if not winner or not default or winner == default or gain is None:
        return None
    ratio, low, high = gain
    changed = {name: value for name, value in winner.items() if default.get(name) != value}
    text = (f"Tuning {operator} ({category}) on the {backend} backend: {describe(tuple(changed.items()))} instead "
            f"of the default {describe(tuple((name, default[name]) for name in changed))} made the kernel "
            f"{ratio:.2f}x faster.")
    evidence = (f"tuned: {record.get('decision', '')}; the default's time over the winner's, each relative to the "
                f"reference timed beside it: {ratio:.2f}x [{low:.2f}, {high:.2f}]; {len(record.get('tried') or [])} "
                f"of {record.get('space_size')} configurations tried in {record.get('evaluations')} evaluations")
    return NewItem(text=text, evidence=evidence, operator=operator, kind="experience",
                   metadata={"provenance": PROVENANCE, "transition": "tuned", "backend": backend, "family": category,
                             "config": dict(winner), "default": dict(default),
                             "gain": {"ratio": ratio, "low": low, "high": high}})


def tuning_lessons(state: EpisodeState, *, category: str, backend: str) -> list[NewItem]:
    """The lessons of the episode's tuning records (none when the tuning step did not run)."""
    operator = state.get("operator", state["task_id"])
    found = (tuning_lesson(record, operator=operator, category=category, backend=backend)
             for record in state.get("tuning") or [])
    return [lesson for lesson in found if lesson is not None]
