"""An experiment: one stream of tasks run under one or more memory policies, each from an identical
copy of the starting memory, with a progress display and one JSONL file of records per policy."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from kernelsage.errors import ConfigurationError, ModelError
from kernelsage.evals.records import (
    EpisodeRecord,
    HotRule,
    RunMetadata,
    StreamStop,
    read_run_metadata,
    write_run_metadata,
)
from kernelsage.evals.stream import (
    StreamSettings,
    StreamStopped,
    UnloadableTask,
    checkpointed,
    order_tasks,
    run_stream,
    stream_entries,
)
from kernelsage.graph.builder import build_graph
from kernelsage.graph.context import Context
from kernelsage.memory_backend.namespaces import run_namespace
from kernelsage.memory_backend.params import DEFAULT_NAMESPACE
from kernelsage.memory_backend.policies import POLICIES
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.tasks.loaders.common import LoadReport
from kernelsage.tasks.model import Task
from kernelsage.tuning.params import check_episode_budget


@dataclass(kw_only=True)
class Experiment:
    run_id: str
    run_dir: Path
    model: str  # "provider:model" or "replay:<cassette>"; a model object may be passed to run_experiment
    policies: list[str] = field(default_factory=lambda: ["sage"])
    namespace: str = DEFAULT_NAMESPACE  # the starting memory; each policy runs on its own copy
    suite: str = "builtin"
    suite_format: str = "auto"
    order: str = "curriculum"
    seed: int = 0
    limit: int | None = None
    backend: str = "cpu"
    budget: int = 30
    # compiles plus profiles each episode's tuning step may spend (docs/tuning.md); None: the Context's default
    # (KERNELSAGE_TUNING_BUDGET, else 0 = no tuning)
    tuning_budget: int | None = None
    top_k: int | None = None
    frozen_memory: Path | None = None  # transfer mode: an exported memory, read-only for the whole run
    params: dict[str, Any] = field(default_factory=dict)  # memory hyperparameters (SageParams overrides)
    database: Path | None = None  # an embedded database kept in this directory (default: DATABASE_URL or per user)
    notes: list[str] = field(default_factory=list)  # said at the top of every report of the run

    def __post_init__(self) -> None:
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown:
            raise ConfigurationError(f"unknown memory policies {unknown}; choose from {', '.join(POLICIES)}")
        if self.budget < 1:
            raise ConfigurationError(f"budget must be at least 1 round, got {self.budget}")
        if self.tuning_budget is not None:
            check_episode_budget(self.tuning_budget)
        if self.frozen_memory is not None and not Path(self.frozen_memory).is_file():
            raise ConfigurationError(f"--frozen-memory {self.frozen_memory}: no such file (an export written by "
                                     "`kernelsage memory export`)")

    def policy_namespace(self, policy: str) -> str:
        """The namespace this run's policy learns in: a copy of the starting memory."""
        return run_namespace(self.namespace, self.run_id, policy)

    def records_path(self, policy: str) -> Path:
        return self.run_dir / f"{policy}.jsonl"


class ExperimentStopped(ModelError):
    """The model failed episode after episode, so the run stopped (run.json says so); the records written so
    far come with it, by policy, for the report."""

    def __init__(self, stop: StreamStop, results: dict[str, list[EpisodeRecord]]) -> None:
        super().__init__(f"{stop.sentence()}; fix the endpoint and rerun with the same --run-id to go on")
        self.stop = stop
        self.results = results


def model_endpoint(model: Any) -> str:
    """The base URL an OpenAI-compatible chat model calls, or "" (a replayed or provider-default model)."""
    while isinstance(model, RunnableBinding):  # bind_tools / bind wrap the model
        model = model.bound
    return str(getattr(model, "openai_api_base", None) or "")


def stream_tasks(experiment: Experiment, report: LoadReport) -> list[Task | UnloadableTask]:
    """The experiment's stream from a loaded suite: a task that failed to load keeps its place and becomes a
    `harness_error` episode; a problem with no task id (a stray file) is reported and skipped."""
    for problem in report.problems:
        if not problem.task_id:
            Console(stderr=True).print(f"[yellow]skipped[/] {problem}", highlight=False)
    tasks = order_tasks(stream_entries(report), experiment.order, seed=experiment.seed)
    return tasks[: experiment.limit] if experiment.limit else tasks


def prepare_memories(store: MemoryStore, experiment: Experiment, embeddings: Any, backend: str) -> None:
    """Give every policy an identical copy of the starting memory: the frozen file when one is given
    (always that file, whatever the database holds), else the starting namespace (created from the
    knowledge pack when it does not exist yet). Existing copies are kept (resume)."""
    from kernelsage.knowledge import has_builtin_pack, seed_knowledge
    from kernelsage.memory_backend.transfer import export_jsonl, import_jsonl

    missing = [p for p in experiment.policies if store.namespace_info(experiment.policy_namespace(p)) is None]
    if not missing:
        return
    if experiment.frozen_memory is not None:
        for policy in missing:
            import_jsonl(store, experiment.frozen_memory, experiment.policy_namespace(policy))
        return
    if store.namespace_info(experiment.namespace) is None:
        start = store.open(experiment.namespace, embeddings=embeddings)
        if has_builtin_pack(backend):
            seed_knowledge(start, backend=backend)
    with tempfile.TemporaryDirectory(prefix="kernelsage-start-") as tmp:
        snapshot = Path(tmp) / "start.jsonl"
        export_jsonl(store, experiment.namespace, snapshot)
        for policy in missing:
            import_jsonl(store, snapshot, experiment.policy_namespace(policy))


def hot_rules(store: MemoryStore, experiment: Experiment) -> dict[str, list[HotRule]]:
    """Each policy's resident rules now, with their provenance (policies without hot memory: none)."""
    rules: dict[str, list[HotRule]] = {}
    for policy in experiment.policies:
        if store.namespace_info(experiment.policy_namespace(policy)) is None:
            continue
        memory = store.open(experiment.policy_namespace(policy), read_only=True, policy=policy)
        rules[policy] = [HotRule(id=r.id, text=r.resident_text, source_text=r.text, kind=r.kind,
                                 operator=r.operator, source_episode=r.source_episode,
                                 adopting_ops=sorted(r.adopting_ops), n_ado=r.n_ado, utility=r.utility,
                                 tokens=r.resident_tokens) for r in memory.hot_rules()]
    return rules


def run_metadata(experiment: Experiment, model: str, url: str, endpoint: str = "") -> RunMetadata:
    """What run.json says of the run before it starts (notes kept from earlier runs of the same id)."""
    from kernelsage.memory_backend.database import redact

    earlier = read_run_metadata(experiment.run_dir)
    notes = list(dict.fromkeys([*(earlier.notes if earlier else []), *experiment.notes]))
    return RunMetadata(
        run_id=experiment.run_id, model=model, replayed=model.startswith("replay:"), policies=experiment.policies,
        namespaces={p: experiment.policy_namespace(p) for p in experiment.policies},
        database=str(experiment.database) if experiment.database is not None else redact(url),
        frozen_memory=str(experiment.frozen_memory) if experiment.frozen_memory else None, notes=notes,
        params=dict(experiment.params),
        hot_rules=earlier.hot_rules if earlier else {}, endpoint=endpoint,
    )


def stream_graph(experiment: Experiment, *, chat_model: Any, backend: Any, store: MemoryStore, embeddings: Any,
                 suite: LoadReport) -> Any:
    """The episode graph (uncompiled) every stream of the experiment runs on."""
    from kernelsage.tasks.loaders import find_task

    return build_graph(models=chat_model, backend=backend, tasks=partial(find_task, suite), memory_store=store,
                       embeddings=embeddings, read_only=experiment.frozen_memory is not None)


def stream_context(experiment: Experiment, policy: str) -> Context:
    """The graph's settings for one policy's episodes of the experiment (an unset tuning budget: the Context's
    own default, KERNELSAGE_TUNING_BUDGET or 0)."""
    tuning = {} if experiment.tuning_budget is None else {"tuning_budget": experiment.tuning_budget}
    return Context(namespace=experiment.policy_namespace(policy), policy=policy, budget=experiment.budget,
                   top_k=experiment.top_k, seed=experiment.seed, consolidate=experiment.frozen_memory is None,
                   seed_knowledge=False, params=dict(experiment.params), **tuning)


def policy_stream(experiment: Experiment, policy: str, *, graph: Any, store: MemoryStore,
                  tasks: list[Task | UnloadableTask], embeddings: Any, model_label: str, backend: str,
                  on_state: Callable[[Task, int, dict[str, Any]], None] | None = None,
                  on_record: Callable[[EpisodeRecord], None] | None = None) -> list[EpisodeRecord]:
    """One policy's stream of the experiment, in its own namespace; the same wherever it runs (this process
    or a Ray worker), so that a parallel run writes the records a sequential one would."""
    namespace = experiment.policy_namespace(policy)
    settings = StreamSettings(run_id=f"{experiment.run_id}/{policy}", policy=policy, namespace=namespace,
                              model=model_label, backend=backend, budget=experiment.budget,
                              read_only=experiment.frozen_memory is not None)
    context = stream_context(experiment, policy)
    memory_handle = partial(store.open, namespace, embeddings=embeddings, policy=policy, read_only=True)
    return run_stream(graph, tasks, settings=settings, context=context, records_path=experiment.records_path(policy),
                      memory=(lambda: memory_handle() if policy != "none" else None),
                      on_state=on_state, on_record=on_record)


def run_experiment(experiment: Experiment, *, model: BaseChatModel | None = None, console: Console | None = None,
                   on_record: Callable[[str, EpisodeRecord], None] | None = None,
                   url: str | None = None) -> dict[str, list[EpisodeRecord]]:
    """Run the stream once per policy; returns the records by policy (resuming finished work).

    `url` is the memory database (default: DATABASE_URL, else the embedded server)."""
    from kernelsage.memory_backend.database import database_url
    from kernelsage.memory_backend.embeddings import make_embeddings
    from kernelsage.models.factory import model_name
    from kernelsage.models.spec import model_from_spec
    from kernelsage.tasks.loaders import load_suite
    from kernelsage.tools.backend import get_backend

    console = console or Console()
    suite = load_suite(experiment.suite, experiment.suite_format)
    tasks = stream_tasks(experiment, suite)
    if not tasks:
        raise ConfigurationError(f"the stream is empty: suite {experiment.suite!r}, order {experiment.order!r}")
    chat_model = model or model_from_spec(experiment.model)
    if url is None and experiment.database is not None:
        from kernelsage.memory_backend.embedded import embedded_database_url

        url = embedded_database_url(experiment.database)
    url = url or database_url()
    embeddings = make_embeddings()
    results: dict[str, list[EpisodeRecord]] = {}
    metadata = run_metadata(experiment, model_name(chat_model), url, model_endpoint(chat_model))
    stop: StreamStop | None = None
    write_run_metadata(experiment.run_dir, metadata)
    with MemoryStore.connect(url) as store, closing(get_backend(experiment.backend)) as backend:
        prepare_memories(store, experiment, embeddings, backend.name)
        builder = stream_graph(experiment, chat_model=chat_model, backend=backend, store=store,
                               embeddings=embeddings, suite=suite)
        with checkpointed(builder, url) as graph, _progress(console) as progress:
            for index, policy in enumerate(experiment.policies):
                bar = progress.add_task(policy, total=len(tasks), detail="")
                solved = [0, 0]

                def show(task: Task, position: int, state: dict[str, Any], bar: int = bar,
                         solved: list[int] = solved) -> None:
                    progress.update(bar, detail=f"{task.id} round {state.get('round', 0)}/{experiment.budget} "
                                                f"{state.get('stage', 'draft')} | solved {solved[0]}/{solved[1]}")

                def recorded(record: EpisodeRecord, bar: int = bar, solved: list[int] = solved,
                             policy: str = policy) -> None:
                    solved[0] += int(record.solved)
                    solved[1] += 1
                    progress.update(bar, advance=1, detail=f"solved {solved[0]}/{solved[1]}")
                    if on_record:
                        on_record(policy, record)

                try:
                    results[policy] = policy_stream(experiment, policy, graph=graph, store=store, tasks=tasks,
                                                    embeddings=embeddings, model_label=model_name(chat_model),
                                                    backend=backend.name, on_state=show, on_record=recorded)
                except StreamStopped as exc:  # the next policies would meet the same endpoint
                    results[policy] = exc.records
                    stop = StreamStop(policy=policy, reason=exc.reason, episodes=len(exc.records),
                                      operators=len(tasks), not_run=experiment.policies[index + 1:])
                    break
        write_run_metadata(experiment.run_dir, metadata.model_copy(
            update={"hot_rules": hot_rules(store, experiment), "stopped": stop}))
    if stop is not None:
        raise ExperimentStopped(stop, results)
    return results


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=console, transient=False)
