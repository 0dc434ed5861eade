"""curator: when the episode ends, credit the memory (ATU), store new experiences, consolidate (UGC)."""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from kernelsage.graph.context import Context
from kernelsage.graph.nodes.common import call_model, render, run_config, text_of
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import Attempt, EpisodeState
from kernelsage.memory_backend.items import MemoryItem, NewItem
from kernelsage.memory_backend.records import EpisodeTrace, Exposure, RoundOutcome
from kernelsage.models.factory import model_name

MAX_DIFF_LINES = 40


def episode_record(state: EpisodeState, policy: str, model: str) -> EpisodeTrace:
    """The memory's view of the episode: every adoption record and every round's outcome."""
    first, best = state.get("first_correct"), state.get("best")
    return EpisodeTrace(
        episode_id=str(state["episode_id"]), operator=state.get("operator", state["task_id"]),
        level=state.get("level"), policy=policy,
        t_first=first["latency"] if first else None, t_best=best["latency"] if best else None,
        hot_version_seen=state.get("hot_version"),
        exposures=tuple(
            Exposure(item_id=a["item_id"], round=a["round"], tier=a["tier"], stage=a["stage"],
                     relevance=a["relevance"], score=a["score"], adopted=a["adopted"], rationale=a["rationale"])
            for a in state.get("adoption", [])
        ),
        rounds=tuple(
            RoundOutcome(round=a["round"], stage=a["stage"], compiled=bool(a["compile"] and a["compile"].get("ok")),
                         correct=a["correct"], latency=a["latency"])
            for a in state.get("attempts", []) if a["compile"] is not None
        ),
        metadata={"task_id": state["task_id"], "model": model},
    )


def code_diff(before: Attempt, after: Attempt) -> str:
    lines: list[str] = []
    for name in sorted(set(before["files"]) | set(after["files"])):
        lines += difflib.unified_diff(before["files"].get(name, "").splitlines(),
                                      after["files"].get(name, "").splitlines(), name, name, lineterm="", n=1)
    return "\n".join(lines[:MAX_DIFF_LINES])


def transitions(state: EpisodeState) -> list[tuple[str, str, str]]:
    """(kind, evidence, diff) for each lesson the trajectory teaches: what fixed a compile error,
    what fixed a wrong result, what made the kernel faster."""
    evaluated = [a for a in state.get("attempts", []) if a["compile"] is not None]
    found: list[tuple[str, str, str]] = []
    for before, after in itertools.pairwise(evaluated):
        if not before["compile"].get("ok") and after["compile"].get("ok"):
            errors = before["compile"].get("errors") or [{"message": before["compile"].get("reason", "")}]
            found.append(("fixed a compile error", f"compiler: {errors[0]['message']}", code_diff(before, after)))
        elif before["compile"].get("ok") and not before["correct"] and after["correct"]:
            message = (before.get("verify") or {}).get("message") or before["status"]
            found.append(("fixed a wrong result", f"{before['status']}: {message}", code_diff(before, after)))
    first, best = state.get("first_correct"), state.get("best")
    if first and best and best["round"] != first["round"] and first["latency"] and best["latency"]:
        found.append(("made it faster", f"{first['latency'] * 1e3:.4f} ms -> {best['latency'] * 1e3:.4f} ms",
                      code_diff(first, best)))
    return found


def extract_experiences(state: EpisodeState, resources: AgentResources, category: str) -> list[NewItem]:
    """Ask the curator model for one reusable lesson per transition, each kept with its evidence."""
    found = transitions(state)
    if not found:
        return []
    model = resources.models.for_role("curator")
    text = "\n\n".join(f"{n + 1}. It {kind}. Evidence: {evidence}\nChange:\n{diff}"
                       for n, (kind, evidence, diff) in enumerate(found))
    prompt = render("experience", task_id=state["task_id"], category=category, backend=resources.backend.name,
                    transitions=text)
    answer = call_model(model, [HumanMessage(prompt)], run_config(state, "curator", model_name(model)))
    lessons = [line[2:].strip() for line in text_of(answer).splitlines() if line.startswith("- ")]
    return [
        NewItem(text=lesson, evidence=f"{kind}; {evidence}", code_example=diff or None,
                operator=state.get("operator", state["task_id"]), kind="experience",
                metadata={"transition": kind, "backend": resources.backend.name})
        for lesson, (kind, evidence, diff) in zip(lessons, found, strict=False) if lesson
    ]


def make_rule_abstractor(resources: AgentResources, state: EpisodeState) -> Callable[[MemoryItem], str]:
    model = resources.models.for_role("curator")

    def abstract(item: MemoryItem) -> str:
        prompt = render("abstraction", backend=resources.backend.name, operators=len(item.adopting_ops),
                        text=item.text, evidence=item.evidence,
                        code_example=f"Code: {item.code_example}" if item.code_example else "")
        return text_of(call_model(model, [HumanMessage(prompt)], run_config(state, "curator", model_name(model))))

    return abstract


def make_curator_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def curator(state: EpisodeState, runtime: Runtime[Context]) -> dict[str, Any]:
        outcome = dict(state.get("outcome") or {})
        memory = resources.memory(runtime.context)
        if memory is None or memory.read_only:
            return {"outcome": outcome | {"memory": {"updated": False, "policy": runtime.context.policy}}}
        task = resources.tasks(state["task_id"])
        record = episode_record(state, memory.policy.name, model_name(resources.models.for_role("generator")))
        lessons = extract_experiences(state, resources, task.category) if memory.policy.learns else []
        committed = memory.commit_episode(record, new_items=lessons)
        report: dict[str, Any] = {
            "updated": committed.applied, "policy": memory.policy.name, "terminal_score": committed.terminal_score,
            "credits": {str(i): c for i, c in committed.credits.items()}, "new_items": committed.new_item_ids,
            "adoption": list(state.get("adoption", [])),
        }
        if runtime.context.consolidate and memory.policy.uses_hot_memory:
            result = memory.consolidate(abstract_rule=make_rule_abstractor(resources, state))
            report["consolidation"] = {"hot_version": result.hot_version, "promoted": list(result.promoted),
                                       "demoted": list(result.demoted), "hot": list(result.hot),
                                       "tokens_used": result.tokens_used, "budget": result.budget}
        return {"outcome": outcome | {"memory": report}}

    return curator
