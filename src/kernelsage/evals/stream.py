"""Task streams: the order of operators, and running one episode per operator with one memory policy.

Every episode appends one JSONL record. Episodes run under the Postgres checkpointer with a thread per
episode, so an interrupted stream resumes where it stopped: finished episodes are skipped, an
unfinished one continues from its last step, and no episode's memory effects happen twice.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGeneration, LLMResult
from pydantic import ValidationError

from kernelsage.errors import ConfigurationError, EpisodeError, ModelError, TaskLoadError, UnknownTaskError
from kernelsage.evals.records import HARNESS_ERROR, EpisodeRecord, TokenUsage, is_harness_error
from kernelsage.graph.context import Context
from kernelsage.graph.records import MemoryUpdate
from kernelsage.graph.runner import run_episode
from kernelsage.graph.state import EpisodeState, attempts, episode_outcome, exposures, memory_update
from kernelsage.tasks.interface import task_runs
from kernelsage.tasks.loaders.common import LoadReport
from kernelsage.tasks.model import Task

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from kernelsage.memory_backend.store import Memory

ORDERS = ("curriculum", "mixed", "level:N", "file:PATH")
StreamTask = TypeVar("StreamTask", bound="Task | UnloadableTask")
MAX_FAILED_EPISODES = 3  # episodes in a row that the model's failures ended before the stream stops


def order_tasks(tasks: Sequence[StreamTask], order: str, *, seed: int = 0) -> list[StreamTask]:
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


class StreamStopped(ModelError):
    """The model failed MAX_FAILED_EPISODES episodes in a row, so the stream stopped; the records written
    so far come with it (`reason` is the message without its advice)."""

    def __init__(self, reason: str, records: list[EpisodeRecord]) -> None:
        super().__init__(f"{reason}: stopping the stream; fix the endpoint and rerun with the same --run-id to go on")
        self.reason = reason
        self.records = records


@dataclass(frozen=True)
class UnloadableTask:
    """A task of the suite that did not load: it keeps its place in the stream as a harness_error episode."""

    id: str
    level: int
    reason: str
    category: str = ""


def stream_entries(report: LoadReport) -> list[Task | UnloadableTask]:
    """The suite's tasks and, in their places (suite order), those that did not load but whose id is known."""
    entries: list[tuple[str, Task | UnloadableTask]] = [(t.origin.path if t.origin else "", t) for t in report.tasks]
    entries += [(p.path, UnloadableTask(p.task_id, p.level, p.message)) for p in report.problems if p.task_id]
    return [entry for _, entry in sorted(entries, key=lambda pair: pair[0])]


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


class SpendLedger:
    """The seconds and tokens an unfinished episode has spent so far, kept beside the stream's records
    (`<policy>.spend.json`), so that a resumed episode's record counts the work done before the interruption."""

    def __init__(self, records_path: Path, episode_id: str) -> None:
        self.path = records_path.with_name(f"{records_path.stem}.spend.json")
        self.episode_id = episode_id
        earlier = self._read().get(episode_id, {})
        self.earlier_seconds = float(earlier.get("seconds", 0.0))
        self.earlier_tokens = TokenUsage(input=int(earlier.get("input", 0)), output=int(earlier.get("output", 0)))

    def total(self, seconds: float, tokens: TokenUsage) -> tuple[float, TokenUsage]:
        """This run's spend added to what earlier, interrupted runs of the episode spent."""
        return self.earlier_seconds + seconds, TokenUsage(input=self.earlier_tokens.input + tokens.input,
                                                          output=self.earlier_tokens.output + tokens.output)

    def save(self, seconds: float, tokens: TokenUsage) -> None:
        total_seconds, total_tokens = self.total(seconds, tokens)
        self._write({**self._read(), self.episode_id: {"seconds": total_seconds, "input": total_tokens.input,
                                                        "output": total_tokens.output}})

    def forget(self) -> None:
        """Drop the episode's entry once its record is written (the file goes when it is empty)."""
        entries = self._read()
        entries.pop(self.episode_id, None)
        self._write(entries)

    def _read(self) -> dict[str, dict[str, float]]:
        try:
            entries = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none yet, or torn by a kill: the spend before it is lost, not the run
            return {}
        return entries if isinstance(entries, dict) else {}

    def _write(self, entries: dict[str, dict[str, float]]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        partial = self.path.with_suffix(".json.partial")
        partial.write_text(json.dumps(entries), encoding="utf-8")
        partial.replace(self.path)


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


def harness_error_record(entry: Task | UnloadableTask, *, episode_id: str, reason: str, position: int,
                         settings: StreamSettings, seconds: float, memory: Memory | None) -> EpisodeRecord:
    """The record of a task the harness could not run: no attempt, no memory effect, the reason."""
    return EpisodeRecord(
        task_id=entry.id, episode_id=episode_id, level=entry.level, solved=False, rounds=0, candidates=0,
        compiled=0, failure=f"{HARNESS_ERROR}: {reason}", run_id=settings.run_id, policy=settings.policy,
        model=settings.model, backend=settings.backend, namespace=settings.namespace, position=position,
        category=entry.category, memory=MemoryUpdate(),
        memory_after=memory.snapshot() if memory is not None else None, seconds=seconds,
    )


def run_stream(graph: CompiledStateGraph, tasks: Sequence[Task | UnloadableTask], *, settings: StreamSettings,
               context: Context, records_path: Path, memory: Callable[[], Memory | None] = lambda: None,
               on_state: Callable[[Task, int, dict[str, Any]], None] | None = None,
               on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
    """One episode per task, in order; returns every record of the run (earlier ones included).

    A task the harness cannot run (it did not load, its cases cannot be described, its reference fails for
    sure, or the episode stopped on the task itself) becomes a `harness_error` record with no memory effect,
    and the stream goes on; a resumed stream finds that record and does not try the task again. The cases
    each task ran with (shapes, dtypes, any scaling) are kept beside the records (`cases_path`)."""
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
        record = _run_entry(graph, task, position=position, episode_id=episode_id, settings=settings,
                            context=context, records_path=records_path, memory=memory, on_state=on_state)
        with records_path.open("a", encoding="utf-8") as out:
            out.write(record.model_dump_json() + "\n")
        SpendLedger(records_path, episode_id).forget()
        records.append(record)
        if on_record:
            on_record(record)
        _stop_when_the_model_keeps_failing(records)
    return records


def _run_entry(graph: CompiledStateGraph, task: Task | UnloadableTask, *, position: int, episode_id: str,
               settings: StreamSettings, context: Context, records_path: Path,
               memory: Callable[[], Memory | None],
               on_state: Callable[[Task, int, dict[str, Any]], None] | None) -> EpisodeRecord:
    """The record of one stream entry: its episode's, or a harness_error one where the task cannot run."""
    start = time.perf_counter()
    problem = task.reason if isinstance(task, UnloadableTask) else _record_cases(task, records_path)
    if problem is None and isinstance(task, Task):
        usage = UsageCounter()
        spend = SpendLedger(records_path, episode_id)

        def step(state: dict[str, Any]) -> None:
            spend.save(time.perf_counter() - start, usage.totals())
            if on_state:
                on_state(task, position, state)

        try:
            state = run_episode(graph, task_id=task.id, level=task.level, context=context, backend=settings.backend,
                                model=settings.model, episode_id=episode_id, callbacks=[usage], on_state=step)
        except (TaskLoadError, UnknownTaskError) as exc:  # the task itself, not the run, is broken
            problem = str(exc)
        else:
            seconds, tokens = spend.total(time.perf_counter() - start, usage.totals())
            return episode_record(state, task=task, position=position, settings=settings,
                                  seconds=seconds, memory=memory(), tokens=tokens)
    return harness_error_record(task, episode_id=episode_id, reason=problem or "", position=position,
                                settings=settings, seconds=time.perf_counter() - start, memory=memory())


def cases_path(records_path: Path) -> Path:
    """Where the cases each task of a stream ran with are kept: `<policy>.cases.json` beside its records."""
    return records_path.with_name(f"{records_path.stem}.cases.json")


def _record_cases(task: Task, records_path: Path) -> str | None:
    """Describe the task's cases (shape-only, `task_runs`), keep them in the stream's cases file, and say why
    the task cannot run, if it cannot."""
    try:
        cases, problem = task_runs(task)
    except Exception as exc:  # the task's own code failed while it was described
        cases, problem = [], f"the task cannot be described: {type(exc).__name__}: {exc}"
    path = cases_path(records_path)
    try:
        known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        known = {}  # a torn file from an interrupted run: written whole again below
    scaling = task.origin.scaling if task.origin else None
    known[task.id] = {"level": task.level, "perf_case": task.perf_case.name if task.cases else None,
                      "source": task.origin.path if task.origin else "", "cases": cases,
                      "scaling": scaling.to_dict() if scaling else None}
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(known, indent=1, default=str) + "\n", encoding="utf-8")
    temporary.replace(path)
    return problem


def _stop_when_the_model_keeps_failing(records: list[EpisodeRecord]) -> None:
    """An endpoint that failed MAX_FAILED_EPISODES episodes in a row would fail the rest too: stop, handing
    back the records (they stay on disk; rerunning the run id resumes after them). Tasks the harness could not
    run say nothing about the model and are passed over."""
    recent = [r for r in records if not is_harness_error(r)][-MAX_FAILED_EPISODES:]
    if len(recent) == MAX_FAILED_EPISODES and all(r.failure for r in recent):
        raise StreamStopped(f"the model failed {MAX_FAILED_EPISODES} episodes in a row ({recent[-1].task_id}: "
                            f"{recent[-1].failure})", records)
