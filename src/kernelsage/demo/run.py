"""`kernelsage demo`: six operators across three levels, offline, with the answers replayed from a recording."""

from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from rich.console import Console
from rich.markup import escape

from kernelsage.demo.script import DEMO_TASKS
from kernelsage.evals.experiment import Experiment, run_experiment
from kernelsage.evals.records import EpisodeRecord

RECORDING = "recording.jsonl"
BUDGET = 3
NAMESPACE = "demo/cpu"
REPLAY_NOTE = ("The model's responses in this demo are replayed from a recording (kernelsage/demo/recording.jsonl) "
               "that was made from a scripted stand-in for an LLM; no model is called and no network is used. "
               "Compilation, verification, profiling, retrieval and memory updates are real.")


def recording_path() -> Path:
    return Path(str(resources.files("kernelsage.demo").joinpath(RECORDING)))


def describe_episode(console: Console, record: EpisodeRecord) -> None:
    """What one episode did: attempts, adoption, credits and consolidation, in a few lines."""
    statuses = " -> ".join(f"r{a.round} {a.status}" for a in record.attempts)
    console.print(f"\n[bold]{record.task_id}[/] (level {record.level}): {statuses}")
    if record.speedup and record.t_best and record.self_speedup:
        console.print(f"  first correct in round {record.first_correct_round}; best {record.t_best * 1e3:.3f} ms "
                      f"per run, {record.speedup:.2f}x the PyTorch reference, {record.self_speedup:.2f}x "
                      "its own first version")
    adopted = sorted({a.item_id for a in record.adoption if a.adopted})
    shown = sorted({a.item_id for a in record.adoption})
    console.print(f"  memory shown: {len(shown)} items; adopted: {adopted or 'none'}")
    memory = record.memory
    if memory.terminal_score is not None:
        gains = {k: round(v, 3) for k, v in memory.credits.items() if v > -0.2}
        console.print(f"  ATU: z = {memory.terminal_score:.3f}; credit to adopted items {gains}, "
                      f"-0.2 to each of the {sum(1 for v in memory.credits.values() if v == -0.2)} ignored ones")
    if memory.new_items:
        console.print(f"  new experiences stored: {memory.new_items}")
    consolidation = memory.consolidation
    if consolidation is not None and consolidation.promoted:
        console.print(f"  [green]promoted into hot memory[/]: {list(consolidation.promoted)} "
                      f"({consolidation.tokens_used}/{consolidation.budget} tokens)")


def run_demo(*, model: BaseChatModel, out_dir: Path, console: Console) -> dict[str, Any]:
    """The demo stream in a fresh embedded database; returns the records and report paths."""
    from kernelsage.evals.report import write_report
    from kernelsage.memory_backend.embedded import embedded_database_url

    console.print(f"[bold yellow]{escape(REPLAY_NOTE)}[/]\n")
    with tempfile.TemporaryDirectory(prefix="kernelsage-demo-") as tmp:
        order = Path(tmp) / "order.txt"
        order.write_text("\n".join(DEMO_TASKS) + "\n")
        experiment = Experiment(run_id="demo", run_dir=out_dir, model="demo", policies=["sage"], namespace=NAMESPACE,
                                order=f"file:{order}", budget=BUDGET, top_k=64)
        for stale in out_dir.glob("*.jsonl"):
            stale.unlink()  # the demo always starts from an empty memory
        url = embedded_database_url(Path(tmp) / "pgdata")
        results = run_experiment(experiment, model=model, console=console, url=url,
                                 on_record=lambda policy, record: describe_episode(console, record))
        hot = _hot_rules(url, experiment.policy_namespace("sage"))
    console.print("\n[bold]hot memory after the stream[/]")
    for rule in hot:
        console.print(f"  - id {rule['id']}: {escape(rule['text'])}")
    paths = write_report(results, out_dir / "report", title="kernelsage demo", notes=[REPLAY_NOTE])
    console.print(f"\nreport: {paths.html}\nmarkdown: {paths.markdown}")
    return {"records": results, "hot_rules": hot, "report": str(paths.html), "markdown": str(paths.markdown)}


def _hot_rules(url: str, namespace: str) -> list[dict[str, Any]]:
    from kernelsage.memory_backend.store import MemoryStore

    with MemoryStore.connect(url) as store:
        memory = store.open(namespace, read_only=True)
        return [{"id": r.id, "text": r.resident_text, "tokens": r.resident_tokens, "utility": r.utility}
                for r in memory.hot_rules()]
