"""adoption_gate: nothing is evaluated until every shown item has a state and a rationale.

Missing ids, and ids that were never shown, are asked for again a bounded number of times; after
that the round is recorded as failed (`adoption_unresolved`) and the candidate is not compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from kernelsage.errors import ParseError
from kernelsage.graph.context import Context
from kernelsage.graph.nodes.common import call_model, render, render_memory, run_config, text_of
from kernelsage.graph.nodes.writer import failed_round, system_message
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import AdoptionEntry, EpisodeState
from kernelsage.models.factory import model_name
from kernelsage.parsing import parse_adoption_only


def gate_problems(shown_ids: list[int], answered: dict[str, Any], unknown: list[int]) -> tuple[list[int], str]:
    """The ids still missing and the sentence that tells the model what is wrong."""
    missing = [i for i in shown_ids if str(i) not in answered]
    problems = []
    if missing:
        problems.append(f"No adoption state for items {missing}.")
    if unknown:
        problems.append(f"Items {unknown} were never shown to you; do not list them.")
    return missing, " ".join(problems)


def make_adoption_gate_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def adoption_gate(state: EpisodeState, runtime: Runtime[Context]) -> dict[str, Any]:
        pending = state.get("pending")
        if pending is None:  # the writer produced nothing to evaluate
            return {}
        shown = state.get("shown", [])
        shown_ids = [item["id"] for item in shown]
        answered = {k: v for k, v in pending["adoption"].items() if int(k) in shown_ids}
        unknown = sorted(int(k) for k in pending["adoption"] if int(k) not in shown_ids)
        role = "optimizer" if state.get("stage") == "refine" else "generator"
        model = resources.models.for_role(role)
        missing, problems = gate_problems(shown_ids, answered, unknown)
        asks = 0
        while problems and asks < runtime.context.max_gate_asks:
            asks += 1
            prompt = render("gate", problems=problems, ids=shown_ids, items=render_memory(shown))
            answer = call_model(model, [system_message(resources), HumanMessage(prompt)],
                                run_config(state, "adoption_gate", model_name(model)))
            try:
                reply = parse_adoption_only(text_of(answer), shown_ids=shown_ids)
            except ParseError:
                continue
            answered |= {str(i): {"adopted": r.adopted, "rationale": r.rationale} for i, r in reply.adoption.items()
                         if i in shown_ids}
            missing, problems = gate_problems(shown_ids, answered, list(reply.unknown_ids))
        if missing:
            return {"pending": None, "attempts": [failed_round(
                state.get("round", 0), state, "adoption_unresolved", f"no adoption state for items {missing} after {asks} re-asks")]}
        by_id = {item["id"]: item for item in shown}
        records = [
            AdoptionEntry(item_id=i, tier=by_id[i]["tier"], round=state.get("round", 0),
                          stage=state.get("stage", "draft"), adopted=bool(answered[str(i)]["adopted"]),
                          rationale=str(answered[str(i)]["rationale"]), relevance=by_id[i]["relevance"],
                          score=by_id[i]["score"])
            for i in shown_ids
        ]
        return {"adoption": records, "pending": {**pending, "adoption": answered, "asks": asks}}

    return adoption_gate
