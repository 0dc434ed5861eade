"""adoption_gate: nothing is evaluated until every shown item has a state and a rationale.

Missing ids, and ids that were never shown, are asked for again a bounded number of times; after
that the round is recorded as failed (`adoption_unresolved`) and the candidate is not compiled. The re-ask
shows the task, the candidate's code and only the items it asks about; a failed re-ask call records the
round as `model_error`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from kernelsage.errors import ModelCallError, ParseError
from kernelsage.graph.nodes.model_calls import call_model, run_config, text_of
from kernelsage.graph.nodes.prompting import code_blocks, render, render_memory, system_message
from kernelsage.graph.nodes.writer import failed_round
from kernelsage.graph.records import as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, pending_candidate, shown_items, stage_of
from kernelsage.memory_backend.records import Exposure
from kernelsage.models.factory import model_name
from kernelsage.parsing import AdoptionRecord, parse_adoption_only


def gate_problems(shown_ids: list[int], answered: dict[int, AdoptionRecord],
                  unknown: list[int]) -> tuple[list[int], str]:
    """The ids still missing and the sentence that tells the model what is wrong."""
    missing = [i for i in shown_ids if i not in answered]
    problems = []
    if missing:
        problems.append(f"No adoption state for items {missing}.")
    if unknown:
        problems.append(f"Items {unknown} were never shown to you; do not list them.")
    return missing, " ".join(problems)


def make_adoption_gate_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def adoption_gate(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        pending = pending_candidate(state)
        if pending is None:  # the writer produced nothing to evaluate
            return {}
        shown = shown_items(state)
        shown_ids = [item.id for item in shown]
        answered = {i: r for i, r in pending.adoption.items() if i in shown_ids}
        unknown = sorted(i for i in pending.adoption if i not in shown_ids)
        model = resources.models.for_role("optimizer" if stage_of(state) == "refine" else "generator")
        missing, problems = gate_problems(shown_ids, answered, unknown)
        asks = 0
        round_no = state.get("round", 0)
        while problems and asks < resources.settings(runtime).max_gate_asks:
            asks += 1
            asked = [item for item in shown if item.id in missing] or shown
            prompt = render("gate", task_id=state["task_id"], problems=problems, code=code_blocks(pending.files),
                            ids=[item.id for item in asked], items=render_memory(asked))
            try:
                answer = call_model(model, [system_message(resources.backend.name), HumanMessage(prompt)],
                                    run_config(state, "adoption_gate", model_name(model), round_no=round_no + 1))
            except ModelCallError as exc:
                return {"pending": None, "attempts": [failed_round(round_no, state, "model_error", str(exc),
                                                                   pending.prompt_tokens)]}
            try:
                reply = parse_adoption_only(text_of(answer), shown_ids=shown_ids)
            except ParseError as exc:
                problems = f"Your last reply could not be used: {exc}"
                continue
            answered |= {i: r for i, r in reply.adoption.items() if i in shown_ids}
            missing, problems = gate_problems(shown_ids, answered, list(reply.unknown_ids))
        if missing:
            detail = f"no adoption state for items {missing} after {asks} re-asks"
            return {"pending": None, "attempts": [failed_round(round_no, state, "adoption_unresolved", detail,
                                                               pending.prompt_tokens)]}
        records = [
            Exposure(item_id=item.id, tier=item.tier, round=round_no, stage=stage_of(state),
                     adopted=answered[item.id].adopted, rationale=answered[item.id].rationale,
                     relevance=item.relevance, score=item.score)
            for item in shown
        ]
        resolved = pending.model_copy(update={"adoption": answered, "asks": asks})
        return {"adoption": [as_state(r) for r in records], "pending": as_state(resolved)}

    return adoption_gate
