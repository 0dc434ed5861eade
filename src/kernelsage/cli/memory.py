"""`kernelsage memory ...`: inspect, export, import and delete memory namespaces."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kernelsage.cli.common import (
    DatabaseOption,
    JsonOption,
    NamespaceOption,
    console,
    new_table,
    open_store,
    print_json,
    say,
)
from kernelsage.cli.memory_serve import serve
from kernelsage.cli.mine import mine
from kernelsage.errors import ConfigurationError, NamespaceError
from kernelsage.memory_backend.params import DEFAULT_NAMESPACE

if TYPE_CHECKING:
    from kernelsage.memory_backend.items import MemoryItem

ParamOption = typer.Option(
    [], "--param", "-p", envvar="KERNELSAGE_PARAMS",
    help="A memory hyperparameter NAME=VALUE (e.g. B=4000), repeatable: the settings the run uses.",
)
RunOption = typer.Option(None, "--run", "-r", help="A run id: the namespace that run learned in (instead of -n).")
PolicyOption = typer.Option(None, "--policy", help="With --run: which policy's namespace, when it ran several.")
# Where --run can name the namespace instead, -n has no default of its own, so giving both is refused.
ChosenNamespaceOption = typer.Option(
    None, "--namespace", "-n",
    help=f"Memory namespace (default: KERNELSAGE_NAMESPACE, else {DEFAULT_NAMESPACE!r}); or name it with --run.")


def _params(texts: list[str]) -> Any:
    from kernelsage.memory_backend.params import SageParams, parse_overrides

    return SageParams().with_overrides(**parse_overrides([p for t in texts for p in t.replace(",", " ").split()]))


memory_app = typer.Typer(help="Inspect and move the memory (PostgreSQL + pgvector).", no_args_is_help=True)


def _resolve(store: Any, namespace: str | None, run: str | None, policy: str | None) -> str:
    """The namespace a command works on: `-n NAME`, or the one run `--run` learned in."""
    if run is None:
        if policy is not None:
            raise ConfigurationError("--policy goes with --run (use -n for a namespace by name)")
        return namespace or os.environ.get("KERNELSAGE_NAMESPACE", DEFAULT_NAMESPACE)
    if namespace is not None:
        raise ConfigurationError(f"-n {namespace!r} and --run {run!r} both name a namespace: give one of them")
    from kernelsage.memory_backend.namespaces import namespaces_of_run, parse_run_namespace

    names = [info.name for info in store.list_namespaces()]
    found = namespaces_of_run(names, run, policy)
    if len(found) == 1:
        return found[0]
    if found:
        policies = ", ".join(parse_run_namespace(name).policy for name in found)
        raise ConfigurationError(f"run {run!r} learned in one namespace per policy ({policies}): add --policy")
    runs = sorted({parse_run_namespace(name).run_id for name in names} - {""})
    raise NamespaceError(f"no namespace of run {run!r}{f' and policy {policy!r}' if policy else ''} in this "
                         f"database (runs here: {', '.join(runs) or 'none'}); `kernelsage memory namespaces` "
                         "lists them")


def _item_row(item: MemoryItem) -> dict[str, Any]:
    return {**dataclasses.asdict(item), "provenance": item.provenance}


def _items_table(title: str, items: list[MemoryItem]) -> Any:
    table = new_table(title)
    for column in ("id", "state", "from", "utility", "shown", "adopted", "ops", "tokens"):
        table.add_column(column, no_wrap=True, justify="left" if column in ("state", "from") else "right")
    table.add_column("text (the rule once abstracted)", ratio=1, min_width=20)
    for item in items:
        text = " ".join(item.resident_text.split())
        table.add_row(
            str(item.id), item.state, item.provenance, f"{item.utility:+.3f}", str(item.n_ret), str(item.n_ado),
            str(len(item.adopting_ops)), str(item.resident_tokens), text if len(text) <= 240 else text[:239] + "…",
        )
    return table


def _key_value_table(title: str, rows: list[tuple[str, str]]) -> Any:
    table = new_table(title, show_header=False)
    table.add_column("field", no_wrap=True, style="bold")
    table.add_column("value", ratio=1)
    for key, value in rows:
        table.add_row(key, value)
    return table


def _words(value: Any) -> str:
    """A field's value as a reader wants it: lists joined, mappings as name=value, nothing as a dash."""
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, dict):
        return _settings(value) if value else "-"
    return "-" if value is None else str(value)


def _settings(values: dict[str, Any] | None) -> str:
    shown = {k: "auto" if k == "probes" and v == 0 else v for k, v in (values or {}).items()}
    return " ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "none"


def _stats_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """A namespace's summary in words."""
    by_state = summary["by_state"]
    adoption = summary.get("adoption_rate")
    mean_utility = summary.get("mean_utility")
    return [
        ("namespace", summary["namespace"]),
        ("items", f"{summary['items']} ({by_state['cold']} cold, {by_state['validated']} validated, "
                  f"{by_state['hot']} hot)"),
        ("from", ", ".join(f"{n} {origin}" for origin, n in summary.get("by_provenance", {}).items()) or "-"),
        ("hot memory", f"{by_state['hot']} resident {'rule' if by_state['hot'] == 1 else 'rules'}, "
                       f"{summary['hot_tokens']} of {summary['hot_budget']} tokens, version {summary['hot_version']}"),
        ("episodes", f"{summary['episodes']} committed, {summary['solved_episodes']} of them solved"),
        ("mean utility", "n/a" if mean_utility is None else f"{mean_utility:+.3f}"),
        ("adoption rate", "nothing shown yet" if adoption is None else
         f"{100 * adoption:.1f}% of the items shown were adopted"),
        ("embeddings", f"{summary['embedding_model']} ({summary['embedding_dim']} dimensions)"),
        ("parameters in force", _settings(summary.get("params"))),
        ("latest episode ran with", _settings(summary.get("last_episode_params"))),
    ]


@memory_app.command("namespaces")
def namespaces(db: str | None = DatabaseOption, as_json: bool = JsonOption) -> None:
    """List the namespaces in the database, with the run and policy each one learned in."""
    from kernelsage.memory_backend.namespaces import parse_run_namespace

    with open_store(db) as store:
        infos = store.list_namespaces()
    rows = [(info, parse_run_namespace(info.name)) for info in infos]
    if as_json:
        print_json([{**dataclasses.asdict(info), "start": place.start, "run_id": place.run_id or None,
                     "policy": place.policy or None} for info, place in rows])
        return
    if not rows:
        say("no namespaces yet: `kernelsage run` and `kernelsage demo` create them")
        return
    table = new_table("namespaces (a run learns in START@RUN/POLICY, a copy of its starting namespace)")
    table.add_column("namespace", no_wrap=True)
    for column in ("run", "policy", "episodes", "hot version"):
        table.add_column(column, no_wrap=True, justify="right" if column in ("episodes", "hot version") else "left")
    for info, place in sorted(rows, key=lambda row: (row[1].run_id, row[0].name)):
        table.add_row(info.name, place.run_id or "-", place.policy or "-", str(info.episode_seq),
                      str(info.hot_version))
    console.print(table)


@memory_app.command("stats")
def stats(namespace: str | None = ChosenNamespaceOption, run: str | None = RunOption, policy: str | None = PolicyOption,
          param: list[str] = ParamOption, db: str | None = DatabaseOption, as_json: bool = JsonOption) -> None:
    """Counts by lifecycle state, hot-memory use, episodes and utility; the parameters in force (from --param
    or KERNELSAGE_PARAMS) and those the latest episode was committed with."""
    with open_store(db) as store:
        name = _resolve(store, namespace, run, policy)
        summary = store.open(name, read_only=True, params=_params(param)).stats()
    if as_json:
        print_json(summary)
        return
    console.print(_key_value_table(f"memory {name}", _stats_rows(summary)))


@memory_app.command("show")
def show(
    item_id: int | None = typer.Argument(None, help="One item's full record; without it, a list."),
    namespace: str | None = ChosenNamespaceOption,
    run: str | None = RunOption,
    policy: str | None = PolicyOption,
    state: str | None = typer.Option(None, help="Only items in this state: cold, validated or hot."),
    limit: int = typer.Option(20, min=1, help="How many items to list."),
    db: str | None = DatabaseOption,
    as_json: bool = JsonOption,
) -> None:
    """Show items by descending utility, or one item with its statistics and provenance."""
    if state is not None and state not in ("cold", "validated", "hot"):
        raise typer.BadParameter(f"unknown state {state!r}: use cold, validated or hot", param_hint="--state")
    with open_store(db) as store:
        name = _resolve(store, namespace, run, policy)
        memory = store.open(name, read_only=True)
        items = [memory.get_item(item_id)] if item_id is not None else memory.list_items(state=state, limit=limit)
    if as_json:
        print_json([_item_row(i) for i in items])
    elif item_id is not None:
        rows = [(key, _words(value)) for key, value in _item_row(items[0]).items()]
        console.print(_key_value_table(f"item {item_id}", rows))
    else:
        console.print(_items_table(f"{name}: items by utility", items))


@memory_app.command("hot")
def hot(namespace: str | None = ChosenNamespaceOption, run: str | None = RunOption, policy: str | None = PolicyOption,
        param: list[str] = ParamOption, db: str | None = DatabaseOption, as_json: bool = JsonOption) -> None:
    """The resident hot rules and the budget they use."""
    with open_store(db) as store:
        name = _resolve(store, namespace, run, policy)
        memory = store.open(name, read_only=True, params=_params(param))
        rules = memory.hot_rules()
        info = memory.info_now()
    used = sum(r.resident_tokens for r in rules)
    budget = memory.params.hot_budget_tokens
    if as_json:
        print_json({"namespace": name, "hot_version": info.hot_version, "tokens_used": used,
                    "budget": budget, "rules": [_item_row(r) for r in rules]})
        return
    console.print(_items_table(f"{name}: hot memory v{info.hot_version}, {used} of {budget} tokens", rules))


@memory_app.command("export")
def export(
    path: Path = typer.Argument(..., help="JSONL file to write."),
    namespace: str | None = ChosenNamespaceOption,
    run: str | None = RunOption,
    policy: str | None = PolicyOption,
    db: str | None = DatabaseOption,
    as_json: bool = JsonOption,
) -> None:
    """Write a namespace (items, statistics, provenance, episodes) to a JSONL file."""
    from kernelsage.memory_backend.transfer import export_jsonl

    with open_store(db) as store:
        name = _resolve(store, namespace, run, policy)
        count = export_jsonl(store, name, path)
    if as_json:
        print_json({"namespace": name, "path": str(path), "records": count})
    else:
        say(f"exported {count} records of {name!r} to {path}")


@memory_app.command("import")
def import_(
    path: Path = typer.Argument(..., help="JSONL file written by `kernelsage memory export`."),
    namespace: str | None = typer.Option(None, "--namespace", "-n",
                                         help="New namespace name (default: the exported name)."),
    db: str | None = DatabaseOption,
    as_json: bool = JsonOption,
) -> None:
    """Load an exported memory into a new namespace, all or nothing."""
    from kernelsage.memory_backend.transfer import import_jsonl

    with open_store(db) as store:
        info = import_jsonl(store, path, namespace)
        summary = store.open(info.name, read_only=True).stats()
    if as_json:
        print_json(summary)
    else:
        say(f"imported {summary['items']} items and {summary['episodes']} episodes into {info.name!r}")


@memory_app.command("delete")
def delete(
    names: list[str] = typer.Argument(None, help="Namespaces to delete, by name."),
    run: str | None = typer.Option(None, "--run", "-r", help="Delete every namespace this run learned in."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    db: str | None = DatabaseOption,
    as_json: bool = JsonOption,
) -> None:
    """Delete namespaces with everything in them (items, episodes, statistics). A run's records under
    runs/<run id> stay; rerun with a new run id afterwards."""
    from kernelsage.memory_backend.namespaces import namespaces_of_run

    with open_store(db) as store:
        known = [info.name for info in store.list_namespaces()]
        chosen = list(dict.fromkeys([*(names or []), *(namespaces_of_run(known, run) if run else [])]))
        if not chosen:
            raise ConfigurationError("name the namespaces to delete, or give --run RUN_ID"
                                     + (f" (no namespace of run {run!r} here)" if run else ""))
        missing = [name for name in chosen if name not in known]
        if missing:
            raise NamespaceError(f"no namespace {', '.join(map(repr, missing))} in this database: nothing deleted")
        if not yes:
            if not sys.stdin.isatty():
                raise ConfigurationError(f"deleting {len(chosen)} namespaces needs confirmation: pass --yes")
            say("about to delete: " + ", ".join(chosen), to=console)
            typer.confirm("Delete them with everything they hold?", abort=True)
        deleted = store.delete_namespaces(chosen)
    if as_json:
        print_json({"deleted": deleted})
    else:
        say(f"deleted {len(deleted)} namespaces: {', '.join(deleted)}")


@memory_app.command("seed")
def seed(
    folder: Path | None = typer.Argument(None, help="A folder of Markdown files (default: the backend's pack)."),
    namespace: str = NamespaceOption,
    backend: str = typer.Option("cpu", help="Whose built-in knowledge pack to use when no folder is given."),
    db: str | None = DatabaseOption,
    as_json: bool = JsonOption,
) -> None:
    """Store a knowledge pack (one item per `## ` section) in a namespace that has none yet."""
    from kernelsage.knowledge import seed_knowledge
    from kernelsage.memory_backend.embeddings import make_embeddings

    with open_store(db) as store:
        memory = store.open(namespace, embeddings=make_embeddings())
        ids = seed_knowledge(memory, backend=backend, folder=folder)
    if as_json:
        print_json({"namespace": namespace, "seeded": ids})
    elif ids:
        say(f"seeded {len(ids)} knowledge items into {namespace!r}")
    else:
        say(f"{namespace!r} already holds knowledge items: nothing seeded")


@memory_app.command("audit")
def audit(
    run: str = typer.Option(..., "--run", "-r", help="The run id whose adoptions to audit."),
    run_dir: Path | None = typer.Option(None, "--run-dir", help="Where the run's records are (default: runs/<run id>)."),
    policy: str | None = typer.Option(None, "--policy", help="Only this policy (default: every policy of the run)."),
    as_json: bool = JsonOption,
) -> None:
    """Adoptions declared vs shown by the code: per policy and per item, the declared adoptions, those the
    written code gives evidence of (names, pragmas, code fragments of the item) and the agreement rate."""
    from kernelsage.evals.audit import audit_records, read_run_records

    by_policy = read_run_records(run_dir or Path("runs") / run, run)
    if policy is not None:
        if policy not in by_policy:
            raise ConfigurationError(f"run {run!r} has no records of policy {policy!r} (it has: "
                                     f"{', '.join(by_policy)})")
        by_policy = {policy: by_policy[policy]}
    audits = audit_records(by_policy)
    if as_json:
        print_json({"run_id": run, "policies": [a.to_dict() for a in audits.values()]})
        return
    for found in audits.values():
        modes = ", ".join(sorted(found.modes)) or "-"
        table = new_table(f"{found.policy}: {found.agreement} of declared adoptions evidenced in the code "
                          f"(ATU credited: {modes}; {found.episodes} episodes)")
        for column in ("item", "declared", "evidenced", "agreement", "cues"):
            table.add_column(column, no_wrap=True, justify="right")
        table.add_column("evidence, or why none", ratio=1, min_width=20)
        for item in sorted(found.items.values(), key=lambda i: (i.agreement.value or 0.0, i.item_id)):
            shown = ", ".join(name for name, _ in item.matched.most_common(4))
            why = shown if item.evidenced == item.declared else " | ".join(filter(None, [shown, item.reason]))
            table.add_row(str(item.item_id), str(item.declared), str(item.evidenced), str(item.agreement),
                          str(item.cues), why or "-")
        if found.items:
            console.print(table)
        else:
            say(f"{found.policy}: no adoption declared in {found.episodes} episodes")
        if found.unaudited:
            say(f"{found.policy}: {found.unaudited} episodes declared adoptions but carry no audit (records "
                "written before the audit existed)")
    say(f"an item's text: kernelsage memory show ID --run {run}" + (" --policy POLICY" if len(audits) > 1 else ""))


memory_app.command("serve")(serve)
memory_app.command("mine")(mine)
