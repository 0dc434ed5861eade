"""`kernelsage demo`: six operators across three levels, offline, with the answers replayed from a recording."""

from __future__ import annotations

import shlex
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from rich.console import Console
from rich.markup import escape

from kernelsage.demo.script import DEMO_TASKS
from kernelsage.errors import ConfigurationError
from kernelsage.evals.experiment import Experiment, run_experiment
from kernelsage.evals.records import RUN_METADATA, EpisodeRecord, read_run_metadata
from kernelsage.evals.report import speedup_words

RECORDING = "recording.jsonl"
RUN_ID = "demo"
BUDGET = 3
TOP_K = 64
POLICY = "sage"
NAMESPACE = "demo/cpu"
DATABASE = "db"  # the demo's memory, under its output directory
REPLAY_NOTE = ("The model's responses in this demo are replayed from a recording (kernelsage/demo/recording.jsonl) "
               "that was made from a scripted stand-in for an LLM; no model is called and no network is used. "
               "Compilation, verification, profiling, retrieval and memory updates are real.")


def recording_path() -> Path:
    return Path(str(resources.files("kernelsage.demo").joinpath(RECORDING)))


def credit_words(record: EpisodeRecord) -> str | None:
    """The episode's ATU update in words: the terminal score, then what adopted and ignored items got."""
    memory = record.memory
    if memory.terminal_score is None:
        return None
    adopted = {a.item_id for a in record.adoption if a.adopted}
    given = sorted((item, credit) for item, credit in memory.credits.items() if item in adopted)
    ignored = [credit for item, credit in memory.credits.items() if item not in adopted]
    z = memory.terminal_score
    meaning = ("no kernel was correct" if not record.solved else
               "the best kernel was no faster than the first correct one" if z == 0 else
               f"the best kernel took {100 * (1 - z):.0f}% of the first correct one's time")
    parts = [f"terminal score z = {z:+.3f} ({meaning})"]
    if given:
        parts.append("credit to the adopted " + ", ".join(f"item {item}: {credit:+.3f}" for item, credit in given))
    else:
        parts.append("no item was adopted")
    if ignored:
        each = f"{ignored[0]:+.3f}" if len(set(ignored)) == 1 else "between " \
            f"{min(ignored):+.3f} and {max(ignored):+.3f}"
        parts.append(f"the {len(ignored)} shown but not adopted got {each} each")
    return "; ".join(parts)


def describe_episode(console: Console, record: EpisodeRecord) -> None:
    """What one episode did: attempts, adoption, credits and consolidation, in a few lines of words."""
    statuses = " -> ".join(f"round {a.round} {a.status}" for a in record.attempts)
    console.print(f"\n[bold]{escape(record.task_id)}[/] (level {record.level}): {escape(statuses)}")
    if record.solved and record.t_best:
        improvement = (f", {record.self_speedup:.2f}x faster than its own first version"
                       if record.self_speedup and record.self_speedup > 1 else "")
        console.print(f"  first correct in round {record.first_correct_round}; best {record.t_best * 1e3:.3f} ms "
                      f"per call, {speedup_words(record.speedup)}{improvement}", highlight=False)
    adopted = sorted({a.item_id for a in record.adoption if a.adopted})
    shown = {a.item_id for a in record.adoption}
    console.print(f"  memory: {len(shown)} items shown, "
                  + (f"{len(adopted)} adopted (ids {', '.join(map(str, adopted))})" if adopted else "none adopted"),
                  highlight=False)
    credits = credit_words(record)
    if credits:
        console.print(f"  credit (ATU): {credits}", highlight=False)
    if record.memory.new_items:
        console.print(f"  new experiences stored: ids {', '.join(map(str, record.memory.new_items))}",
                      highlight=False)
    consolidation = record.memory.consolidation
    if consolidation is not None and consolidation.promoted:
        console.print(f"  [green]promoted into hot memory[/]: ids {', '.join(map(str, consolidation.promoted))} "
                      f"({consolidation.tokens_used} of {consolidation.budget} tokens)", highlight=False)


def fresh_database(directory: Path) -> Path:
    """The demo's database directory, emptied: the demo always starts from an empty memory. Only a
    database directory (or an empty one) is removed, never anything else that happens to be there."""
    if directory.exists():
        if not directory.is_dir() or (any(directory.iterdir()) and not (directory / "PG_VERSION").is_file()):
            raise ConfigurationError(f"{directory} exists and is not a memory database: move it or choose "
                                     "another --out")
        shutil.rmtree(directory)
    return directory


def inspect_commands(out_dir: Path, program: str = "kernelsage") -> list[str]:
    """How to look at what the demo learned, as commands that work as written; `program` is how kernelsage
    was started (`.venv/bin/kernelsage` after `make demo`, which is not on PATH)."""
    db = shlex.quote((out_dir / DATABASE).as_posix())
    return [f"{program} memory namespaces --db {db}",
            f"{program} memory stats --db {db} --run {RUN_ID}",
            f"{program} memory hot --db {db} --run {RUN_ID}",
            f"{program} memory show --db {db} --run {RUN_ID}"]


def run_demo(*, model: BaseChatModel, out_dir: Path, console: Console,
             divergences: list[str] | None = None, program: str = "kernelsage") -> dict[str, Any]:
    """The demo stream in a fresh embedded database kept under `out_dir/db`; returns the records, the hot
    rules and the report paths. `divergences` (filled by the replay while it runs) are the requests that
    differed from the recording; the report says how many. The closing commands begin with `program`."""
    from kernelsage.evals.report import write_report

    console.print(f"[bold yellow]{escape(REPLAY_NOTE)}[/]\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    database = fresh_database(out_dir / DATABASE)
    for stale in [*out_dir.glob("*.jsonl"), out_dir / RUN_METADATA]:
        stale.unlink(missing_ok=True)
    order = out_dir / "order.txt"
    order.write_text("\n".join(DEMO_TASKS) + "\n", encoding="utf-8")
    experiment = Experiment(run_id=RUN_ID, run_dir=out_dir, model="demo", policies=[POLICY], namespace=NAMESPACE,
                            order=f"file:{order}", budget=BUDGET, top_k=TOP_K, database=database,
                            notes=[REPLAY_NOTE])
    results = run_experiment(experiment, model=model, console=console,
                             on_record=lambda policy, record: describe_episode(console, record))
    metadata = read_run_metadata(out_dir)
    rules = metadata.hot_rules if metadata else {}
    hot = [{"id": r.id, "text": r.text, "tokens": r.tokens, "utility": r.utility} for r in rules.get(POLICY, [])]
    console.print("\n[bold]hot memory after the stream[/]")
    for rule in hot:
        console.print(f"  - id {rule['id']}: {escape(rule['text'])}", highlight=False)
    notes = [REPLAY_NOTE]
    if divergences:
        notes.append(f"On this machine {len(divergences)} model request(s) differed from the recording's (a round "
                     "judged differently, e.g. by a time limit or a speed verdict on a busier machine); each was "
                     "answered with the nearest recorded answer of the same step.")
    paths = write_report(results, out_dir / "report", title="kernelsage demo", notes=notes, hot_rules=rules)
    console.print(f"\nreport: {paths.html}\nmarkdown: {paths.markdown}", highlight=False, soft_wrap=True)
    console.print(f"memory: {database} (namespace {experiment.policy_namespace(POLICY)}); inspect it with",
                  highlight=False, soft_wrap=True)
    commands = inspect_commands(out_dir, program)
    for command in commands:
        console.print(f"  {command}", highlight=False, soft_wrap=True, markup=False)
    return {"records": results, "hot_rules": hot, "report": str(paths.html.resolve()), "markdown": str(paths.markdown.resolve()),
            "database": str(database), "namespace": experiment.policy_namespace(POLICY),
            "inspect": commands}
