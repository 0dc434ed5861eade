"""`kernelsage memory ...`: inspect, export and import a memory namespace."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from kernelsage.cli.common import JsonOption, NamespaceOption, console, open_store, print_json
from kernelsage.memory_backend.items import MemoryItem

ParamOption = typer.Option(
    [], "--param", "-p", envvar="KERNELSAGE_PARAMS",
    help="A memory hyperparameter NAME=VALUE (e.g. B=4000), repeatable: the settings the run uses.",
)


def _params(texts: list[str]) -> Any:
    from kernelsage.memory_backend.params import SageParams, parse_overrides

    return SageParams().with_overrides(**parse_overrides([p for t in texts for p in t.replace(",", " ").split()]))


memory_app = typer.Typer(help="Inspect and move the memory (PostgreSQL + pgvector).", no_args_is_help=True)


def _item_row(item: MemoryItem) -> dict[str, Any]:
    return dataclasses.asdict(item)


def _items_table(title: str, items: list[MemoryItem]) -> Table:
    table = Table(title=title)
    for column in ("id", "state", "u", "n_ret", "n_ado", "ops", "p", "tokens", "text"):
        table.add_column(column, overflow="fold", max_width=60 if column == "text" else None)
    for item in items:
        table.add_row(
            str(item.id), item.state, f"{item.utility:+.3f}", str(item.n_ret), str(item.n_ado),
            str(len(item.adopting_ops)), f"{item.access:.2f}", str(item.resident_tokens),
            item.resident_text.replace("\n", " ")[:200],
        )
    return table


@memory_app.command("namespaces")
def namespaces(as_json: bool = JsonOption) -> None:
    """List the namespaces in the database."""
    with open_store() as store:
        infos = store.list_namespaces()
    if as_json:
        print_json([dataclasses.asdict(i) for i in infos])
        return
    table = Table(title="namespaces")
    for column in ("name", "dim", "embeddings", "episodes", "hot version"):
        table.add_column(column)
    for info in infos:
        table.add_row(info.name, str(info.embedding_dim), info.embedding_model, str(info.episode_seq),
                      str(info.hot_version))
    console.print(table)


@memory_app.command("stats")
def stats(namespace: str = NamespaceOption, param: list[str] = ParamOption, as_json: bool = JsonOption) -> None:
    """Counts by lifecycle state, hot-memory use, episodes and utility; the parameters in force (from --param
    or KERNELSAGE_PARAMS) and those the latest episode was committed with."""
    with open_store() as store:
        summary = store.open(namespace, read_only=True, params=_params(param)).stats()
    if as_json:
        print_json(summary)
        return
    table = Table(title=f"memory {namespace}", show_header=False)
    for key, value in summary.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(table)


@memory_app.command("show")
def show(
    item_id: int | None = typer.Argument(None, help="One item's full record; without it, a list."),
    namespace: str = NamespaceOption,
    state: str | None = typer.Option(None, help="Only items in this state: cold, validated or hot."),
    limit: int = typer.Option(20, min=1, help="How many items to list."),
    as_json: bool = JsonOption,
) -> None:
    """Show items by descending utility, or one item with its statistics and provenance."""
    if state is not None and state not in ("cold", "validated", "hot"):
        raise typer.BadParameter(f"unknown state {state!r}: use cold, validated or hot", param_hint="--state")
    with open_store() as store:
        memory = store.open(namespace, read_only=True)
        items = [memory.get_item(item_id)] if item_id is not None else memory.list_items(state=state, limit=limit)
    if as_json:
        print_json([_item_row(i) for i in items])
    elif item_id is not None:
        table = Table(title=f"item {item_id}", show_header=False)
        for key, value in _item_row(items[0]).items():
            table.add_row(key, str(value))
        console.print(table)
    else:
        console.print(_items_table(f"{namespace}: items", items))


@memory_app.command("hot")
def hot(namespace: str = NamespaceOption, param: list[str] = ParamOption, as_json: bool = JsonOption) -> None:
    """The resident hot rules and the budget they use."""
    with open_store() as store:
        memory = store.open(namespace, read_only=True, params=_params(param))
        rules = memory.hot_rules()
        info = memory.info_now()
    used = sum(r.resident_tokens for r in rules)
    budget = memory.params.hot_budget_tokens
    if as_json:
        print_json({"namespace": namespace, "hot_version": info.hot_version, "tokens_used": used,
                    "budget": budget, "rules": [_item_row(r) for r in rules]})
        return
    console.print(_items_table(f"{namespace}: hot memory v{info.hot_version}, {used}/{budget} tokens", rules))


@memory_app.command("export")
def export(
    path: Path = typer.Argument(..., help="JSONL file to write."),
    namespace: str = NamespaceOption,
    as_json: bool = JsonOption,
) -> None:
    """Write a namespace (items, statistics, provenance, episodes) to a JSONL file."""
    from kernelsage.memory_backend.transfer import export_jsonl

    with open_store() as store:
        count = export_jsonl(store, namespace, path)
    if as_json:
        print_json({"namespace": namespace, "path": str(path), "records": count})
    else:
        console.print(f"exported {count} records of {namespace!r} to {path}")


@memory_app.command("import")
def import_(
    path: Path = typer.Argument(..., help="JSONL file written by `kernelsage memory export`."),
    namespace: str | None = typer.Option(None, "--namespace", "-n",
                                         help="New namespace name (default: the exported name)."),
    as_json: bool = JsonOption,
) -> None:
    """Load an exported memory into a new namespace, all or nothing."""
    from kernelsage.memory_backend.transfer import import_jsonl

    with open_store() as store:
        info = import_jsonl(store, path, namespace)
        summary = store.open(info.name, read_only=True).stats()
    if as_json:
        print_json(summary)
    else:
        console.print(f"imported {summary['items']} items and {summary['episodes']} episodes into {info.name!r}")


@memory_app.command("seed")
def seed(
    folder: Path | None = typer.Argument(None, help="A folder of Markdown files (default: the backend's pack)."),
    namespace: str = NamespaceOption,
    backend: str = typer.Option("cpu", help="Whose built-in knowledge pack to use when no folder is given."),
    as_json: bool = JsonOption,
) -> None:
    """Store a knowledge pack (one item per `## ` section) in a namespace that has none yet."""
    from kernelsage.knowledge import seed_knowledge
    from kernelsage.memory_backend.embeddings import make_embeddings

    with open_store() as store:
        memory = store.open(namespace, embeddings=make_embeddings())
        ids = seed_knowledge(memory, backend=backend, folder=folder)
    if as_json:
        print_json({"namespace": namespace, "seeded": ids})
    elif ids:
        console.print(f"seeded {len(ids)} knowledge items into {namespace!r}")
    else:
        console.print(f"{namespace!r} already holds knowledge items: nothing seeded")
