"""The curator's adoption audit: each item declared adopted, checked against the code the episode wrote.

The checks (`kernelsage.graph.adoption_audit`) are kept in the episode's memory update whatever the run's
setting; with `SageParams.adoption = "audited"` the curator credits only the evidenced ones (`audited_trace`).
Each round's code is compared with the previous candidate of the episode only, never with the prompt's
contract or the task's description: newly using what the contract names is still following the item. C and C++
are read through the backend's own preprocessor (`preprocessor_for`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernelsage.errors import KernelsageError
from kernelsage.graph.adoption_audit import (
    AdoptionCheck,
    Cues,
    Round,
    audit_episode,
    item_cues,
    preprocessor_for,
)
from kernelsage.graph.state import EpisodeState, attempts
from kernelsage.memory_backend.records import EpisodeTrace

NOT_EVIDENCED = "[audit: declared adopted, no evidence in the code] "
MAX_RATIONALE = 2_000  # validation's limit on a rationale


def check_adoptions(state: EpisodeState, memory: Any, backend: str | Any) -> list[AdoptionCheck]:
    """Audit every item the episode's candidates declared adopted (items the memory no longer holds are
    checked against nothing they name, so they are not evidenced)."""
    rounds = [Round(round=a.round, files=a.files, adopted=frozenset(a.adopted)) for a in attempts(state) if a.files]
    declared = sorted({i for r in rounds for i in r.adopted})
    if not declared:
        return []
    cues: dict[int, Cues] = {}
    for item_id in declared:
        try:
            item = memory.get_item(item_id)
        except KernelsageError:
            continue
        cues[item_id] = item_cues([item.text, item.rule_text or ""], item.code_example)
    return audit_episode(rounds, cues, preprocessor=preprocessor_for(backend))


def audited_trace(trace: EpisodeTrace, checks: list[AdoptionCheck]) -> EpisodeTrace:
    """The trace ATU credits under `adoption = "audited"`: a declared adoption without evidence becomes
    shown but not adopted (its rationale says so); the declarations stay in the episode's metadata."""
    evidenced = {c.item_id for c in checks if c.evidenced}
    exposures = tuple(
        replace_exposure(e) if e.adopted and e.item_id not in evidenced else e for e in trace.exposures)
    metadata = {**trace.metadata, "adoption": "audited",
                "declared_adopted": sorted({e.item_id for e in trace.exposures if e.adopted}),
                "evidenced": sorted(evidenced)}
    return replace(trace, exposures=exposures, metadata=metadata)


def replace_exposure(exposure: Any) -> Any:
    return exposure.model_copy(update={"adopted": False,
                                       "rationale": (NOT_EVIDENCED + exposure.rationale)[:MAX_RATIONALE]})
