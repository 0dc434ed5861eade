"""What an episode is doing, as events a command can print one line at a time where no live board is drawn.

The runner sees the episode's state after every step; two states in a row tell what just happened: a round
judged, the memory committed. Events go to the `kernelsage.events` logger with their fields in the record's
`extra`, so a host that embeds the graph sees nothing unless it configures logging, and the command line
prints them (kernelsage.cli.run_log).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EVENTS = logging.getLogger("kernelsage.events")
DETAIL_CHARS = 160  # a failed round's reason, cut to its first line and this many characters


@dataclass(frozen=True)
class Event:
    name: str  # episode_start, round, tune, commit (and, from elsewhere, run_start, episode_end, model_retry)
    message: str  # the line a person reads
    fields: dict[str, Any] = field(default_factory=dict)  # the same facts for a machine


def emit(event: Event) -> None:
    """Send one event to the `kernelsage.events` logger (nothing is printed unless someone listens)."""
    EVENTS.info(event.message, extra={"event": event.name, "fields": event.fields})


def first_line(text: str, limit: int = DETAIL_CHARS) -> str:
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def episode_started(*, task_id: str, level: int | None, episode_id: str, policy: str, resumed: bool) -> Event:
    verb = "resumed from its checkpoint" if resumed else "started"
    level_words = f" (level {level})" if level is not None else ""
    return Event("episode_start", f"episode {verb}: {task_id}{level_words}, policy {policy}",
                 {"operator": task_id, "level": level, "episode_id": episode_id, "policy": policy,
                  "resumed": resumed})


def round_verdict(attempt: Mapping[str, Any], *, task_id: str, budget: int | None) -> Event:
    """One judged round: its status and, for a correct kernel, its speed against the reference."""
    number, status = attempt.get("round", 0), str(attempt.get("status", "?"))
    evaluation = attempt.get("evaluation") or {}
    latency, reference = evaluation.get("latency"), evaluation.get("reference_latency")
    speedup = reference / latency if latency and reference else None
    of = f"/{budget}" if budget else ""
    words = f"{task_id} round {number}{of}: {status}"
    if evaluation.get("correct") and speedup is not None:
        words += f", {speedup:.2f}x the reference's speed ({latency * 1e3:.3f} ms)"
    elif not evaluation and attempt.get("detail"):
        words += f" ({first_line(attempt['detail'])})"
    return Event("round", words, {"operator": task_id, "round": number, "budget": budget, "status": status,
                                  "correct": bool(evaluation.get("correct")), "speedup": speedup,
                                  "latency_s": latency, "detail": first_line(attempt.get("detail") or "")})


def tuning_done(record: Mapping[str, Any], *, task_id: str) -> Event:
    """The tuning step's outcome: the configuration kept and why, or why it stopped."""
    error = record.get("error")
    winner = " ".join(f"{name}={value}" for name, value in (record.get("winner") or {}).items())
    words = (f"{task_id}: tuning stopped: {first_line(error)}" if error else
             f"{task_id}: tuned in {record.get('evaluations')} evaluations: {winner} kept, {record.get('decision')}")
    return Event("tune", words, {"operator": task_id, "winner": record.get("winner"), "default": record.get("default"),
                                 "gain": record.get("gain"), "evaluations": record.get("evaluations"),
                                 "error": error})


def memory_committed(update: Mapping[str, Any], *, task_id: str) -> Event:
    """The curator's commit: the ATU credits, the new experiences and what consolidation promoted."""
    credits = update.get("credits") or {}
    new_items = list(update.get("new_items") or [])
    promoted = list((update.get("consolidation") or {}).get("promoted") or [])
    score = update.get("terminal_score")
    if not update.get("updated"):
        words = f"{task_id}: memory unchanged (no memory, a frozen one, or committed before)"
    else:
        words = (f"{task_id}: memory committed: {len(credits)} items credited"
                 + (f" (terminal score {score:+.3f})" if score is not None else "")
                 + f", {len(new_items)} new experiences" + (f", promoted {promoted}" if promoted else ""))
    return Event("commit", words, {"operator": task_id, "updated": bool(update.get("updated")),
                                   "terminal_score": score, "credited": len(credits), "new_items": new_items,
                                   "promoted": promoted})


def step_events(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Event]:
    """What happened between two states of one episode: a tuning, the rounds judged, then the memory committed."""
    task_id = str(after.get("task_id") or before.get("task_id") or "?")
    budget = after.get("budget")
    tuned = len(before.get("tuning") or [])
    events = [tuning_done(record, task_id=task_id) for record in (after.get("tuning") or [])[tuned:]]
    seen = len(before.get("attempts") or [])
    events += [round_verdict(attempt, task_id=task_id, budget=budget) for attempt in (after.get("attempts") or [])[seen:]]
    if after.get("memory_update") is not None and before.get("memory_update") is None:
        events.append(memory_committed(after["memory_update"], task_id=task_id))
    return events
