"""Task streams: the order of operators, and running one episode per operator with one memory policy.

Every episode appends one JSONL record. Episodes run under the Postgres checkpointer with a thread per
episode, so an interrupted stream resumes where it stopped: finished episodes are skipped, an
unfinished one continues from its last step, and no episode's memory effects happen twice.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGeneration, LLMResult
from pydantic import ValidationError

from kernelsage.errors import ConfigurationError, EpisodeError, ModelError
from kernelsage.evals.records import EpisodeRecord, TokenUsage
from kernelsage.graph.context import Context
from kernelsage.graph.records import MemoryUpdate
from kernelsage.graph.runner import run_episode
from kernelsage.graph.state import EpisodeState, attempts, episode_outcome, exposures, memory_update
from kernelsage.tasks.model import Task

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from kernelsage.memory_backend.store import Memory

ORDERS = ("curriculum", "mixed", "level:N", "file:PATH")
MAX_FAILED_EPISODES = 3  # episodes in a row that the model's failures ended before the stream stops


def order_tasks(tasks: Sequence[Task], order: str, *, seed: int = 0) -> list[Task]:
    """The stream: `curriculum` (level 1 -> 2 -> 3, suite order within a level), `mixed` (shuffled with
    the seed), `level:N` (one level) or `file:PATH` (task ids, one per line, `#` comments)."""
    if order == "curriculum":
        return sorted(tasks, key=lambda t: t.level)  # stable: suite order within a level
    if order == "mixed":
        shuffled = list(tasks)
        random.Random(seed).shuffle(shuffled)
        return shuffled
    if order.startswith("level:"):
        try:
            level = int(order.removeprefix("level:"))
        except ValueError:
            raise ConfigurationError(f"order {order!r}: the level must be a number, e.g. level:3") from None
        chosen = [t for t in tasks if t.level == level]
        if not chosen:
            raise ConfigurationError(f"order {order!r}: the suite has no level-{level} tasks")
        return chosen
    if order.startswith("file:"):
        path = Path(order.removeprefix("file:"))
        if not path.is_file():
            raise ConfigurationError(f"order file {path} does not exist")
        by_id = {t.id: t for t in tasks}
        ids = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        unknown = [i for i in ids if i and i not in by_id]
        if unknown:
            raise ConfigurationError(f"{path}: unknown task ids {unknown}")
        return [by_id[i] for i in ids if i]
    raise ConfigurationError(f"unknown order {order!r}; use one of {', '.join(ORDERS)}")


@dataclass(frozen=True, kw_only=True)
class StreamSettings:
    run_id: str
    policy: str
    namespace: str
    model: str
    backend: str
    budget: int = 30
    read_only: bool = False  # a frozen memory: retrieval only


class UsageCounter(BaseCallbackHandler):
    """Adds up the tokens every model call of an episode reports (whatever the provider calls itself)."""

    def __init__(self) -> None:
        self.input = self.output = 0
        self._lock = threading.Lock()

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                usage = getattr(generation.message, "usage_metadata", None) if isinstance(
                    generation, ChatGeneration) else None
                if usage:
                    with self._lock:
                        self.input += usage.get("input_tokens", 0)
                        self.output += usage.get("output_tokens", 0)

    def totals(self) -> TokenUsage:
        return TokenUsage(input=self.input, output=self.output)


def read_done(records_path: Path) -> dict[str, EpisodeRecord]:
    """Episodes already recorded in a run's JSONL, by episode id (a torn last line is ignored)."""
    done: dict[str, EpisodeRecord] = {}
    if not records_path.exists():
        return done
    for line in records_path.read_text(encoding="utf-8").splitlines():
        try:
            record = EpisodeRecord.model_validate_json(line)
        except ValidationError:
            continue  # an interrupted write: that episode is resumed from its checkpoint instead
        done[record.episode_id] = record
    return done


def episode_record(state: EpisodeState, *, task: Task, position: int, settings: StreamSettings,
                   seconds: float, memory: Memory | None, tokens: TokenUsage | None = None) -> EpisodeRecord:
    """The JSONL record of one finished episode: its outcome, its records, and the run's settings."""
    outcome = episode_outcome(state)
    if outcome is None:
        raise EpisodeError(f"episode {state.get('episode_id')} of {task.id} ended without a result")
    return EpisodeRecord(
        **dict(outcome), run_id=settings.run_id, policy=settings.policy, model=settings.model,
        backend=settings.backend, namespace=settings.namespace, position=position, category=task.category,
        attempts=attempts(state), adoption=exposures(state), memory=memory_update(state) or MemoryUpdate(),
        memory_after=memory.snapshot() if memory is not None else None, seconds=seconds,
        tokens=tokens or TokenUsage(),
    )


@contextmanager
def checkpointed(graph_builder: Any, database_url: str) -> Iterator[CompiledStateGraph]:
    """The episode graph compiled with a Postgres checkpointer on the memory's own database."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(database_url) as saver:
        saver.setup()
        yield graph_builder.compile(checkpointer=saver)


def run_stream(graph: CompiledStateGraph, tasks: Sequence[Task], *, settings: StreamSettings, context: Context,
               records_path: Path, memory: Callable[[], Memory | None] = lambda: None,
               on_state: Callable[[Task, int, dict[str, Any]], None] | None = None,
               on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
    """One episode per task, in order; returns every record of the run (earlier ones included)."""
    records_path.parent.mkdir(parents=True, exist_ok=True)
    done = read_done(records_path)
    records: list[EpisodeRecord] = []
    for position, task in enumerate(tasks):
        episode_id = f"{settings.run_id}:{position}:{task.id}"
        if episode_id in done:
            records.append(done[episode_id])
            if on_record:
                on_record(done[episode_id])
            continue
        start = time.perf_counter()
        usage = UsageCounter()
        state = run_episode(
            graph, task_id=task.id, level=task.level, context=context, backend=settings.backend,
            model=settings.model, episode_id=episode_id, callbacks=[usage],
            on_state=(lambda s, t=task, p=position: on_state(t, p, s)) if on_state else None,
        )
        record = episode_record(state, task=task, position=position, settings=settings,
                                seconds=time.perf_counter() - start, memory=memory(), tokens=usage.totals())
        with records_path.open("a", encoding="utf-8") as out:
            out.write(record.model_dump_json() + "\n")
        records.append(record)
        if on_record:
            on_record(record)
        _stop_when_the_model_keeps_failing(records)
    return records


def _stop_when_the_model_keeps_failing(records: Sequence[EpisodeRecord]) -> None:
    """An endpoint that failed MAX_FAILED_EPISODES episodes in a row would fail the rest too: stop with one
    line (the recorded episodes stay; rerunning the run id resumes after them)."""
    recent = records[-MAX_FAILED_EPISODES:]
    if len(recent) == MAX_FAILED_EPISODES and all(r.failure for r in recent):
        raise ModelError(f"the model failed {MAX_FAILED_EPISODES} episodes in a row ({recent[-1].task_id}: "
                         f"{recent[-1].failure}): stopping the stream; fix the endpoint and rerun with the same "
                         f"--run-id to go on")
