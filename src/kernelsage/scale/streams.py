"""`run` and `compare` on Ray: each (policy, order, seed) stream is one Ray task, its episodes in order.

The driver prepares every policy's copy of the starting memory (once, before any stream starts), starts the
device pool, the progress board and the model-call gate, then waits for the streams and writes run.json,
the records and the report exactly as the sequential command does. A stream's worker builds its own chat
model, store connection and graph; its episodes run under the Postgres checkpointer, so a worker that dies
is replaced by Ray (the task is retried) and the stream resumes: finished episodes are read from the JSONL,
the unfinished one continues from its last step, and the episode commit's ledger keeps memory effects once.
Streams are spread over the nodes, and one whose node was lost runs again on another the same way; the
run's actors stay on the driver's node (placement.py). Before any of it, the cluster is checked to hold the
evaluators and a stream (capacity.py): a run that could only wait ends at once, saying what to change.
"""

from __future__ import annotations

import dataclasses
import os
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from kernelsage.errors import ConfigurationError, KernelsageError
from kernelsage.evals.experiment import Experiment, ExperimentStopped
from kernelsage.evals.records import EpisodeRecord, StreamStop
from kernelsage.scale.board import Display, open_board, waiting_streams
from kernelsage.scale.capacity import (
    alive_nodes,
    capacity_problem,
    evaluator_home,
    evaluator_needs,
    waiting_reason,
)
from kernelsage.scale.cluster import adopt_secrets, import_ray, worker_secrets
from kernelsage.scale.devices import DevicePlan, PooledBackend, device_plan, start_pool
from kernelsage.scale.faults import cluster_failure
from kernelsage.scale.gate import limit_calls, open_gate
from kernelsage.scale.placement import SPREAD, this_node

# A stream mostly waits for its model; its compiles are short. A quarter of a CPU lets four streams share a
# core while the evaluators keep whole CPUs for timing.
STREAM_CPUS = 0.25
STREAM_RETRIES = 3  # Ray reruns a stream whose worker or node died this many times; each run resumes the last
WAIT_S = 0.5  # how often the display is redrawn


@dataclass(frozen=True, kw_only=True)
class StreamJob:
    experiment: Experiment  # its run_dir absolute, so that workers find it whatever their directory
    policy: str
    url: str
    pool: Any
    board: Any
    gate: Any | None
    secrets: dict[str, str]  # the driver's keys and database URL: a task argument, which no state query shows


@dataclass(frozen=True)
class StreamOutcome:
    records: list[EpisodeRecord]
    stopped: str | None  # why the model stopped the stream, or None


def run_stream_job(job: StreamJob) -> StreamOutcome:
    """In a Ray worker: one policy's stream, as the sequential command runs it."""
    from kernelsage.evals.experiment import policy_stream, stream_graph, stream_tasks
    from kernelsage.evals.stream import StreamStopped, checkpointed
    from kernelsage.memory_backend.embeddings import make_embeddings
    from kernelsage.memory_backend.store import MemoryStore
    from kernelsage.models.factory import model_name
    from kernelsage.models.spec import model_from_spec
    from kernelsage.tasks.loaders import load_suite
    from kernelsage.tools.backend import get_backend

    adopt_secrets(job.secrets)
    experiment, policy, board = job.experiment, job.policy, job.board
    board.started.remote(policy, os.getpid(), this_node(import_ray()))
    suite = load_suite(experiment.suite, experiment.suite_format)
    tasks = stream_tasks(experiment, suite)
    chat_model = model_from_spec(experiment.model)
    if job.gate is not None:
        limit_calls(chat_model, job.gate)
    embeddings = make_embeddings()

    def show(task: Any, position: int, state: dict[str, Any]) -> None:
        board.round.remote(policy, f"{task.id} round {state.get('round', 0)}/{experiment.budget} "
                                   f"{state.get('stage', 'draft')}")

    def recorded(record: EpisodeRecord) -> None:
        board.episode.remote(policy, record.episode_id, record.solved)

    with MemoryStore.connect(job.url) as store, closing(get_backend(experiment.backend)) as local:
        builder = stream_graph(experiment, chat_model=chat_model, backend=PooledBackend(local, job.pool),
                               store=store, embeddings=embeddings, suite=suite)
        with checkpointed(builder, job.url) as graph:
            try:
                records = policy_stream(experiment, policy, graph=graph, store=store, tasks=tasks,
                                        embeddings=embeddings, model_label=model_name(chat_model),
                                        backend=local.name, on_state=show, on_record=recorded)
            except StreamStopped as exc:
                return StreamOutcome(exc.records, exc.reason)
    return StreamOutcome(records, None)


def _database_url(experiment: Experiment) -> str:
    from kernelsage.memory_backend.database import database_url

    if experiment.database is not None:
        from kernelsage.memory_backend.embedded import embedded_database_url

        return embedded_database_url(experiment.database)
    return database_url()


def run_on_ray(experiment: Experiment, *, chat_model: Any, console: Console, eval_slots: int = 1,
               max_model_calls: int | None = None) -> dict[str, list[EpisodeRecord]]:
    """The experiment with its streams in parallel on the Ray cluster already joined; records by policy, in
    the order of `experiment.policies` (as `run_experiment` returns them)."""
    from kernelsage.evals.experiment import (
        hot_rules,
        model_endpoint,
        prepare_memories,
        run_metadata,
        stream_tasks,
    )
    from kernelsage.evals.records import write_run_metadata
    from kernelsage.memory_backend.embeddings import make_embeddings
    from kernelsage.memory_backend.store import MemoryStore
    from kernelsage.models.factory import model_name
    from kernelsage.models.limits import ModelLimits
    from kernelsage.tasks.loaders import load_suite

    ray = import_ray()
    tasks = stream_tasks(experiment, load_suite(experiment.suite, experiment.suite_format))
    if not tasks:
        raise ConfigurationError(f"the stream is empty: suite {experiment.suite!r}, order {experiment.order!r}")
    driver = this_node(ray)
    plan = device_plan(experiment.backend, ray.cluster_resources(), eval_slots)
    home = _checked_capacity(ray, plan, driver)
    url = _database_url(experiment)
    endpoint = model_endpoint(chat_model)
    metadata = run_metadata(experiment, model_name(chat_model), url, endpoint)
    write_run_metadata(experiment.run_dir, metadata)
    with MemoryStore.connect(url) as store:
        prepare_memories(store, experiment, make_embeddings(), experiment.backend)
        _prepare_checkpoints(url)
        pool = start_pool(ray, plan, backend=experiment.backend, suite=experiment.suite,
                          suite_format=experiment.suite_format, evaluators_on=home, pool_on=driver)
        gate = open_gate(ray, endpoint or experiment.model, max_model_calls, ModelLimits.from_env().deadline,
                         on=driver) if max_model_calls else None
        board = open_board(ray, on=driver)
        shared = dataclasses.replace(experiment, run_dir=experiment.run_dir.resolve())
        # Retries cover a worker or a node that died (Ray's system failures), not an error of the stream's own.
        stream = ray.remote(num_cpus=STREAM_CPUS, max_retries=STREAM_RETRIES, retry_exceptions=False,
                            scheduling_strategy=SPREAD)(run_stream_job)
        secrets = worker_secrets()
        refs = {policy: stream.remote(StreamJob(experiment=shared, policy=policy, url=url, pool=pool, board=board,
                                                gate=gate, secrets=secrets)) for policy in experiment.policies}
        watch = _Watch(board=board, pool=pool, evaluator_cpus=evaluator_needs(plan).get("CPU", 0.0) * plan.count,
                       display=Display(console, dict.fromkeys(experiment.policies, len(tasks))))
        outcomes = _gather(ray, refs, watch, run_id=experiment.run_id)
        results = {p: _kept(experiment, p, outcomes.get(p)) for p in experiment.policies}
        stop = _first_stop(experiment, outcomes, results, len(tasks))
        write_run_metadata(experiment.run_dir, metadata.model_copy(
            update={"hot_rules": hot_rules(store, experiment), "stopped": stop}))
    if stop is not None:
        raise ExperimentStopped(stop, results)
    return results


def _prepare_checkpoints(url: str) -> None:
    """The checkpointer's tables, made once before the streams start: each stream's `setup()` applies
    LangGraph's migrations, and several streams applying them at once on a fresh database collide
    (a duplicate key in checkpoint_migrations)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()


def _checked_capacity(ray: Any, plan: DevicePlan, driver: str) -> str | None:
    """Where the evaluators are kept (the driver's node, or None: where Ray places them), once the cluster
    is known to hold them and a stream; a cluster that cannot is refused in one line that says what to change."""
    nodes = alive_nodes(ray.nodes())
    home = evaluator_home(nodes, plan, driver)
    problem = capacity_problem(nodes, plan, STREAM_CPUS, home)
    if problem:
        raise ConfigurationError(problem)
    return home


@dataclass(frozen=True, kw_only=True)
class _Watch:
    """What the driver draws while it waits: the board, the pool's devices, and why a stream waits."""

    board: Any
    pool: Any
    evaluator_cpus: float  # what the evaluators hold of the cluster's CPUs
    display: Display

    def redraw(self, ray: Any, running: list[str]) -> None:
        snapshot = ray.get(self.board.snapshot.remote())
        waiting = waiting_streams(snapshot, running, {n.id for n in alive_nodes(ray.nodes())})
        if waiting:
            reason = waiting_reason(ray.available_resources().get("CPU", 0.0),
                                    ray.cluster_resources().get("CPU", 0.0), self.evaluator_cpus, STREAM_CPUS)
            waiting = {stream: how + reason for stream, how in waiting.items()}
        self.display.show(snapshot, ray.get(self.pool.busy.remote()), waiting)


def _gather(ray: Any, refs: dict[str, Any], watch: _Watch, *, run_id: str) -> dict[str, StreamOutcome]:
    """Wait for the streams, redrawing the display; a stream the model stopped cancels those still running
    (they would meet the same endpoint), as the sequential command does not start them. What the cluster
    lost past Ray's retries ends the command in one line naming the --run-id that goes on."""
    policy_of = {ref: policy for policy, ref in refs.items()}
    pending, outcomes = list(refs.values()), {}
    try:
        with watch.display:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    outcomes[policy_of[ref]] = _outcome(ray, ref)
                    if outcomes[policy_of[ref]].stopped:
                        for other in pending:
                            ray.cancel(other, force=True)
                        pending = []
                watch.redraw(ray, [policy_of[ref] for ref in pending])
    except KeyboardInterrupt:  # stop the cluster's work too; the run resumes from the records and checkpoints
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    except ray.exceptions.RayError as exc:
        for ref in pending:
            ray.cancel(ref, force=True)
        failure = cluster_failure(ray, exc, run_id=run_id)
        if failure is None:
            raise
        raise failure from None
    return outcomes


def _outcome(ray: Any, ref: Any) -> StreamOutcome:
    """A stream's outcome; a failure inside it is raised here as itself, so the command says it in one line."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, KernelsageError):
            raise cause from None
        raise


def _kept(experiment: Experiment, policy: str, outcome: StreamOutcome | None) -> list[EpisodeRecord]:
    """A stream's records, also in the driver's run directory (a worker on another host wrote its own); a
    cancelled stream's are those its worker had written."""
    from kernelsage.evals.stream import read_done

    path = experiment.records_path(policy)
    done = read_done(path)
    if outcome is None:
        return list(done.values())
    missing = [r for r in outcome.records if r.episode_id not in done]
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.writelines(r.model_dump_json() + "\n" for r in missing)
    return outcome.records


def _first_stop(experiment: Experiment, outcomes: dict[str, StreamOutcome], results: dict[str, list[EpisodeRecord]],
                operators: int) -> StreamStop | None:
    """The stop of the first policy (in the command's order) the model stopped, naming the streams that did
    not finish because of it; None when none stopped."""
    for policy in experiment.policies:
        outcome = outcomes.get(policy)
        if outcome is not None and outcome.stopped:
            unfinished = [p for p in experiment.policies
                          if p != policy and (p not in outcomes or len(results[p]) < operators)]
            return StreamStop(policy=policy, reason=outcome.stopped, episodes=len(outcome.records),
                              operators=operators, not_run=unfinished)
    return None
