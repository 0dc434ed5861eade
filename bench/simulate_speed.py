"""How fast the simulator runs a study, and where its time goes. Runs policies x orders x seeds streams
(the stochastic stand-in generator, no model) on a fresh embedded PostgreSQL + pgvector (or DATABASE_URL
with --use-database-url), one after another or in --workers processes, and prints the wall time,
episodes per second, the seconds per phase summed over streams, and a fingerprint of every stream's
measures: two runs with the same fingerprint produced the same figures (e.g. --workers 1 and 2).
With --count-statements (one process) it also counts, per call of each phase, the SQL statements it sends
(BEGIN and COMMIT included) and the times it waits for the server's answers: once per statement, except in
pipeline mode, where statements sent together are waited for together (a wait there may end with only part
of the answers in, and the next read waits again: an upper bound of the round trips).
Not a test: figures, not assertions. The last line is one JSON object.

    nice -n 10 .venv/bin/python bench/simulate_speed.py --policies sage,uniform,atu-only,random-ugc,none,value \\
        --orders curriculum,mixed,level:3 --seeds 4 --episodes 140 --workers 2     # 10,080 episodes
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from kernelsage.evals.simulator import truth as truth_module
from kernelsage.evals.simulator.dispatch import StreamOutcome, in_process, process_pool, simulation_url
from kernelsage.evals.simulator.study import StudySpec, study_streams
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.embedded import embedded_database_url
from kernelsage.memory_backend.store import MemoryStore


def fingerprint(outcomes: list[StreamOutcome]) -> str:
    """A hash of every stream's measures, in a fixed order (the same figures give the same hash)."""
    rows = sorted((o.spec.order, o.spec.policy, o.spec.seed, sorted(o.measures.items())) for o in outcomes)
    return hashlib.sha256(json.dumps(rows, default=repr).encode()).hexdigest()[:16]


class StatementCounter:
    """Counts the statements psycopg sends (cursor executes and copies, and the connection's own commands:
    BEGIN, COMMIT, ROLLBACK) and the round trips they take, attributed to the simulator's phase under way
    (`Truth.timed`). Statements queued in pipeline mode are waited for together, at a sync or a read."""

    def __init__(self) -> None:
        self.phase = "simulator"
        self.statements: dict[str, int] = {}
        self.waits: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def _current(self) -> str:
        """The phase under way; statements of other threads (the store's index builds) count apart."""
        return self.phase if threading.current_thread() is threading.main_thread() else "background"

    def _count(self, conn: psycopg.Connection) -> None:
        phase = self._current()
        self.statements[phase] = self.statements.get(phase, 0) + 1
        if conn._pipeline is None:
            self.waits[phase] = self.waits.get(phase, 0) + 1

    def _sync(self) -> None:
        phase = self._current()
        self.waits[phase] = self.waits.get(phase, 0) + 1

    def install(self) -> None:
        counter = self
        cursor_execute, copy, exec_command = psycopg.Cursor.execute, psycopg.Cursor.copy, \
            psycopg.Connection._exec_command
        pipeline = psycopg._pipeline_base.BasePipeline
        sync_gen, fetch_gen, timed = pipeline._sync_gen, pipeline._fetch_gen, truth_module.Truth.timed

        def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
            counter._count(self.connection)
            return cursor_execute(self, query, params, **kwargs)

        def copy_(self, statement, params=None, **kwargs):  # type: ignore[no-untyped-def]
            counter._count(self.connection)
            return copy(self, statement, params, **kwargs)

        def command(self, command, *args, **kwargs):  # type: ignore[no-untyped-def]
            counter._count(self)
            return exec_command(self, command, *args, **kwargs)

        def sync(self):  # type: ignore[no-untyped-def]
            counter._sync()
            return sync_gen(self)

        def fetch(self, *, flush):  # type: ignore[no-untyped-def]
            if flush and self.result_queue:  # a cursor's fetch, or the pipeline's exit: waits for results
                counter._sync()
            return fetch_gen(self, flush=flush)

        def timed_(self, phase, call):  # type: ignore[no-untyped-def]
            counter.phase = phase
            counter.calls[phase] = counter.calls.get(phase, 0) + 1
            try:
                return timed(self, phase, call)
            finally:
                counter.phase = "simulator"

        psycopg.Cursor.execute, psycopg.Cursor.copy = execute, copy_  # type: ignore[method-assign]
        psycopg.Connection._exec_command = command  # type: ignore[method-assign]
        pipeline._sync_gen, pipeline._fetch_gen = sync, fetch  # type: ignore[method-assign]
        truth_module.Truth.timed = timed_  # type: ignore[method-assign]

    def per_call(self) -> dict[str, dict[str, float]]:
        """Per phase: its calls, and the statements and round trips per call (background: in all)."""
        calls = {**self.calls, "background": 1}
        return {phase: {"calls": calls[phase], "statements": round(self.statements.get(phase, 0) / calls[phase], 2),
                        "waits": round(self.waits.get(phase, 0) / calls[phase], 2)}
                for phase in sorted(calls) if phase in self.statements or phase in self.calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="sage,uniform,atu-only,random-ugc,none,value")
    parser.add_argument("--orders", default="curriculum,mixed,level:3")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1, help="processes running streams (1: this process)")
    parser.add_argument("--use-database-url", action="store_true", help="DATABASE_URL instead of a fresh server")
    parser.add_argument("--durable", action="store_true", help="wait for the disk at every commit (in-process only; "
                        "the default is dispatch.simulation_url's asynchronous commit)")
    parser.add_argument("--count-statements", action="store_true", help="count SQL statements and round trips "
                        "per call of each phase (one process only)")
    args = parser.parse_args()
    counter = StatementCounter() if args.count_statements else None
    if counter is not None:
        if args.workers != 1:
            parser.error("--count-statements counts in this process: use --workers 1")
        counter.install()
    spec = StudySpec(policies=tuple(args.policies.split(",")), orders=tuple(args.orders.split(",")),
                     seeds=args.seeds, first_seed=args.first_seed, episodes=args.episodes)
    streams = study_streams(spec)
    with tempfile.TemporaryDirectory(prefix="ks-simulate-speed-") as data:
        Path(data).chmod(0o755)  # the embedded server may run as another user
        url = os.environ["DATABASE_URL"] if args.use_database_url else embedded_database_url(Path(data) / "pgdata")
        store = MemoryStore(open_pool(url if args.durable else simulation_url(url)), owns_pool=True)
        start, cpu = time.perf_counter(), time.process_time()
        dispatch = in_process(store, lambda _: False) if args.workers == 1 else \
            process_pool(url, args.workers, lambda _: False)
        outcomes = []
        for outcome in dispatch(streams):
            outcomes.append(outcome)
            print(f"{len(outcomes)}/{len(streams)} {outcome.spec.policy} {outcome.spec.order} s{outcome.spec.seed}: "
                  f"{outcome.seconds:.1f} s, {time.perf_counter() - start:.0f} s elapsed", flush=True)
        wall = time.perf_counter() - start
        store.close()
    episodes = len(streams) * args.episodes
    phases: dict[str, float] = {}
    for outcome in outcomes:
        for phase, seconds in outcome.phases.items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    by_policy: dict[str, float] = {}
    for outcome in outcomes:
        by_policy[outcome.spec.policy] = by_policy.get(outcome.spec.policy, 0.0) + outcome.seconds
    summary = {"episodes": episodes, "streams": len(streams), "workers": args.workers, "durable": args.durable,
               "wall_s": round(wall, 1),
               "episodes_per_s": round(episodes / wall, 2), "ms_per_episode": round(1000 * wall / episodes, 1),
               "main_process_cpu_s": round(time.process_time() - cpu, 1), "load_average": os.getloadavg(),
               "phase_s": {k: round(v, 1) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])},
               "stream_s_by_policy": {k: round(v, 1) for k, v in by_policy.items()},
               "statements_per_call": counter.per_call() if counter else None,
               "fingerprint": fingerprint(outcomes), "problems": [p for o in outcomes for p in o.problems]}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
