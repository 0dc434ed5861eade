"""One (policy, order, seed) stream as a unit of work, and ways to run many of them.

Streams are independent: each draws from its own random streams (draws.py) and runs in a namespace of
its own, so they can run in any order, in any process, on any machine that reaches the database, and a
study gets the same figures. `run_one` is the picklable entry point a dispatcher calls (a local process
pool here; Ray or another scheduler the same way): it opens its own store and returns a `StreamOutcome`
of plain values.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from kernelsage.evals.simulator.measures import learning_curve, stream_measures
from kernelsage.evals.simulator.run import StreamResult, StreamSpec, run_stream
from kernelsage.memory_backend.store import MemoryStore

# Runs many streams: yields each one's outcome as it ends, in any order.
Dispatch = Callable[[Sequence[StreamSpec]], Iterable["StreamOutcome"]]


@dataclass(frozen=True, kw_only=True)
class StreamOutcome:
    """What a study keeps of one stream: its measures, learning curve and broken invariants, and the whole
    stream (for the plots) only when asked for."""

    spec: StreamSpec
    measures: dict[str, float | None]
    curve: list[tuple[int, float]]
    problems: list[str]
    seconds: float
    phases: dict[str, float]  # seconds per phase (retrieve, commit, consolidate, ...; "simulator": the rest)
    example: StreamResult | None = None


def phase_seconds(result: StreamResult) -> dict[str, float]:
    """Where the stream's time went: the memory's calls by phase, and the simulator's own work."""
    phases: dict[str, float] = {}
    for _, phase, ms in result.truth.latencies:
        phases[phase] = phases.get(phase, 0.0) + ms / 1000
    phases["simulator"] = max(0.0, result.seconds - sum(phases.values()))
    return phases


def invariant_problems(result: StreamResult) -> list[str]:
    """Broken invariants of a stream: one commit per episode, utilities within the credit bounds, hot
    memory within its budget. Empty when all hold."""
    spec, problems = result.spec, []
    name = f"{spec.policy}/{spec.order}/seed {spec.seed}"
    if result.committed_episodes != spec.episodes or not all(r.memory.updated for r in result.records):
        problems.append(f"{name}: {result.committed_episodes} episodes committed for {spec.episodes} run")
    low = -max(spec.params.delta, spec.params.beta)
    if result.utility_range and not low - 1e-9 <= result.utility_range[0] <= result.utility_range[1] <= 1.0:
        problems.append(f"{name}: utilities span {result.utility_range}, outside [{low}, 1]")
    if result.max_hot_tokens > spec.params.hot_budget_tokens:
        problems.append(f"{name}: hot memory held {result.max_hot_tokens} tokens over B={spec.params.hot_budget_tokens}")
    return problems


def measure_stream(store: MemoryStore, spec: StreamSpec, *, keep: bool = False) -> StreamOutcome:
    """Run one stream on `store` and measure it; `keep` returns the whole stream too."""
    result = run_stream(store, spec)
    return StreamOutcome(spec=spec, measures=stream_measures(result), curve=learning_curve(result),
                         problems=invariant_problems(result), seconds=result.seconds,
                         phases=phase_seconds(result), example=result if keep else None)


def simulation_url(database_url: str) -> str:
    """The database URL with asynchronous commit for this client's sessions. A simulated stream's namespace
    is deleted when the stream ends, so its commits need not wait for the disk: a server crash could lose
    the last few, never half of one (each transaction stays atomic and isolated, and every query sees the
    same data, so the figures are the same). Each transaction's wait for the write-ahead log to reach the
    disk is a large part of the memory's time per episode on a busy machine."""
    options = conninfo_to_dict(database_url).get("options") or ""
    return make_conninfo(database_url, options=f"{options} -c synchronous_commit=off".strip())


def run_one(spec: StreamSpec, database_url: str, keep: bool = False) -> StreamOutcome:
    """The entry point for a worker: one stream on the database at `database_url` (with asynchronous
    commit, see simulation_url), with a store and connection pool of its own, closed before it returns."""
    with MemoryStore.connect(simulation_url(database_url)) as store:
        return measure_stream(store, spec, keep=keep)


def in_process(store: MemoryStore, keep: Callable[[StreamSpec], bool]) -> Dispatch:
    """Run the streams one after another on this process's store."""
    def dispatch(specs: Sequence[StreamSpec]) -> Iterator[StreamOutcome]:
        for spec in specs:
            yield measure_stream(store, spec, keep=keep(spec))
    return dispatch


def process_pool(database_url: str, workers: int, keep: Callable[[StreamSpec], bool]) -> Dispatch:
    """Run the streams in `workers` fresh processes (spawned: no connection or thread of this process is
    inherited), each stream on its own store at `database_url`."""
    def dispatch(specs: Sequence[StreamSpec]) -> Iterator[StreamOutcome]:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = [pool.submit(run_one, spec, database_url, keep(spec)) for spec in specs]
            for future in as_completed(futures):
                yield future.result()
    return dispatch
