"""curator: when the episode ends, credit the memory (ATU), store new experiences (the model's lessons from the
episode's transitions, and a tuning win's lesson), consolidate (UGC).

Experience extraction and rule abstraction are advisory: when their model call fails, the episode's
credits are still committed, with no new lessons, and a validated item waits for its rule until a later
consolidation. Lessons and rules are bounded (`bounds`) before they enter the memory.
"""

from __future__ import annotations

import difflib
import itertools
import logging
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.runtime import Runtime

from kernelsage.errors import ModelCallError
from kernelsage.graph.nodes.adoption_check import audited_trace, check_adoptions
from kernelsage.graph.nodes.bounds import (
    MAX_DIFF_CHARS,
    MAX_LESSON_CHARS,
    MAX_RULE_CHARS,
    MAX_SUMMARY_CHARS,
    bound,
)
from kernelsage.graph.nodes.model_calls import call_model, run_config, text_of
from kernelsage.graph.nodes.prompting import first_error, render
from kernelsage.graph.nodes.tuning_lesson import tuning_lessons
from kernelsage.graph.records import Attempt, MemoryUpdate, as_state
from kernelsage.graph.resources import AgentResources
from kernelsage.graph.state import EpisodeState, attempts, best_attempt, exposures, first_correct
from kernelsage.memory_backend.items import MemoryItem, NewItem
from kernelsage.memory_backend.records import EpisodeTrace, RoundOutcome
from kernelsage.models.factory import model_name

MAX_DIFF_LINES = 40
UNTIMED_UNIT = 1.0  # T_first = T_best of an untimed solved episode in the memory's trace: a ratio of 1, no time
log = logging.getLogger(__name__)


def episode_trace(state: EpisodeState, policy: str, model: str) -> EpisodeTrace:
    """The memory's view of the episode: every adoption record and every evaluated round's outcome.

    The memory reads a solved episode from its T_first and credits speed by T_best / T_first. A kernel that
    was correct but not timed (an interpreter) is solved with no speed to credit: both are UNTIMED_UNIT, so
    z = 0 (correctness credit only), and its rounds carry no latency; metadata says "timed": false."""
    first, best = first_correct(state), best_attempt(state)
    untimed = first is not None and first.untimed
    return EpisodeTrace(
        episode_id=str(state["episode_id"]), operator=state.get("operator", state["task_id"]),
        level=state.get("level"), policy=policy,
        t_first=UNTIMED_UNIT if untimed else first.latency if first else None,
        t_best=UNTIMED_UNIT if untimed else best.latency if best else None,
        hot_version_seen=state.get("hot_version"), exposures=tuple(exposures(state)),
        rounds=tuple(RoundOutcome(round=a.round, stage=a.stage, compiled=a.compiled, correct=a.correct,
                                  latency=a.latency) for a in attempts(state) if a.evaluated),
        metadata={"task_id": state["task_id"], "model": model, **({"timed": False} if untimed else {})},
    )


def code_diff(before: Attempt, after: Attempt) -> str:
    lines: list[str] = []
    for name in sorted(set(before.files) | set(after.files)):
        lines += difflib.unified_diff(before.files.get(name, "").splitlines(), after.files.get(name, "").splitlines(),
                                      name, name, lineterm="", n=1)
    return bound("\n".join(lines[:MAX_DIFF_LINES]), MAX_DIFF_CHARS)


def _first_error(attempt: Attempt) -> str:
    assert attempt.evaluation is not None
    first = first_error(attempt)
    return bound(first.message if first else attempt.evaluation.compile.reason, MAX_SUMMARY_CHARS)


def transitions(state: EpisodeState) -> list[tuple[str, str, str]]:
    """(kind, evidence, diff) for each lesson the trajectory teaches: what fixed a compile error,
    what fixed a wrong result, what made the kernel faster."""
    evaluated = [a for a in attempts(state) if a.evaluated and not a.tuned]  # the model's own rounds
    found: list[tuple[str, str, str]] = []
    for before, after in itertools.pairwise(evaluated):
        if not before.compiled and after.compiled:
            found.append(("fixed a compile error", f"compiler: {_first_error(before)}", code_diff(before, after)))
        elif before.compiled and not before.correct and after.correct:
            verify = before.evaluation.verify if before.evaluation else None
            message = bound((verify.message if verify else "") or before.status, MAX_SUMMARY_CHARS)
            found.append(("fixed a wrong result", f"{before.status}: {message}", code_diff(before, after)))
    first, best = first_correct(state), best_attempt(state)
    # A tuned best teaches its lesson from the tuning record (`tuning_lesson`), with the gain it measured.
    if first and best and best.round != first.round and first.latency and best.latency and not best.tuned:
        found.append(("made it faster", f"{first.latency * 1e3:.4f} ms -> {best.latency * 1e3:.4f} ms",
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
    try:
        answer = call_model(model, [HumanMessage(prompt)], run_config(state, "curator", model_name(model)))
    except ModelCallError as exc:  # advisory: the credits are committed without new lessons
        log.warning("curator: no lessons from episode %s: %s", state.get("episode_id"), exc)
        return []
    lessons = [bound(line[2:].strip(), MAX_LESSON_CHARS) for line in text_of(answer).splitlines()
               if line.startswith("- ")]
    return [
        NewItem(text=lesson, evidence="; ".join(f"{kind}; {evidence}" for kind, evidence, _ in taught),
                code_example=taught[0][2] or None, operator=state.get("operator", state["task_id"]),
                kind="experience",
                # the task's category is the operator family within which near-duplicate lessons merge
                metadata={"transition": taught[0][0], "backend": resources.backend.name, "family": category})
        for lesson, taught in lessons_once(lessons, found)
    ]


def lessons_once(lessons: list[str], found: list[tuple[str, str, str]]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each distinct lesson once, with every transition that taught it: a model that gives the same line for
    two transitions of one episode would otherwise store the same item twice. Text is compared without case
    and with runs of white space as one."""
    merged: dict[str, tuple[str, list[tuple[str, str, str]]]] = {}
    for lesson, transition in zip(lessons, found, strict=False):
        if lesson:
            merged.setdefault(" ".join(lesson.casefold().split()), (lesson, []))[1].append(transition)
    return list(merged.values())


def make_rule_abstractor(resources: AgentResources, state: EpisodeState) -> Callable[[MemoryItem], str]:
    model = resources.models.for_role("curator")

    def abstract(item: MemoryItem) -> str:
        prompt = render("abstraction", backend=resources.backend.name, operators=len(item.adopting_ops),
                        text=bound(item.text, MAX_RULE_CHARS), evidence=bound(item.evidence or "", MAX_RULE_CHARS),
                        code_example=f"Code: {bound(item.code_example, MAX_DIFF_CHARS)}" if item.code_example else "")
        try:
            answer = call_model(model, [HumanMessage(prompt)], run_config(state, "curator", model_name(model)))
        except ModelCallError as exc:  # advisory: no rule now; the item stays validated for a later try
            log.warning("curator: no rule for item %s: %s", item.id, exc)
            return ""
        return bound(text_of(answer).strip(), MAX_RULE_CHARS)

    return abstract


def make_curator_node(resources: AgentResources) -> Callable[..., dict[str, Any]]:
    def curator(state: EpisodeState, runtime: Runtime[Any]) -> dict[str, Any]:
        settings = resources.settings(runtime)
        memory = resources.memory(settings)
        if memory is None:
            return {"memory_update": as_state(MemoryUpdate(policy=settings.policy))}
        audit = check_adoptions(state, memory, resources.backend)  # kept whatever is credited
        if memory.read_only:
            return {"memory_update": as_state(MemoryUpdate(policy=settings.policy, audit=audit))}
        trace = episode_trace(state, memory.policy.name, model_name(resources.models.for_role("generator")))
        if memory.params.adoption == "audited":  # credit only the adoptions the code shows
            trace = audited_trace(trace, audit)
        category = resources.tasks(state["task_id"]).category
        lessons = (extract_experiences(state, resources, category)
                   + tuning_lessons(state, category=category, backend=resources.backend.name)
                   if memory.policy.learns else [])
        committed = memory.commit_episode(trace, new_items=lessons)
        consolidation = None
        if settings.consolidate and memory.policy.uses_hot_memory:
            consolidation = memory.consolidate(abstract_rule=make_rule_abstractor(resources, state))
        update = MemoryUpdate(updated=committed.applied, policy=memory.policy.name,
                              terminal_score=committed.terminal_score, credits=committed.credits,
                              new_items=committed.new_item_ids, unstored=committed.unstored,
                              consolidation=consolidation,
                              adoption=memory.params.adoption, audit=audit)
        return {"memory_update": as_state(update)}

    return curator
