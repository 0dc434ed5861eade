"""Progress on a cluster: the streams report to one board actor, the driver draws one live display from it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:  # the board actor imports this module: it stays clear of the graph package
    from kernelsage.graph.runner_events import Event


NODE_ID_CHARS = 12  # of a node's id in a line (Ray's ids are 56 hex digits; `ray list nodes` shows them whole)


class Board:
    """What every stream has done: finished episodes (by id, so a retried stream counts none twice),
    solved ones, and the round in flight."""

    def __init__(self) -> None:
        self.done: dict[str, dict[str, bool]] = {}
        self.detail: dict[str, str] = {}
        self.workers: dict[str, int] = {}
        self.nodes: dict[str, str] = {}  # where each stream's worker runs (the last one, when Ray ran it again)

    def started(self, stream: str, pid: int, node: str | None = None) -> None:
        self.workers[stream] = pid
        if node is not None:
            self.nodes[stream] = node

    def episode(self, stream: str, episode_id: str, solved: bool) -> None:
        self.done.setdefault(stream, {})[episode_id] = solved
        self.detail[stream] = ""

    def round(self, stream: str, text: str) -> None:
        self.detail[stream] = text

    def snapshot(self) -> dict[str, Any]:
        return {"done": {s: (len(d), sum(d.values())) for s, d in self.done.items()}, "detail": dict(self.detail),
                "workers": dict(self.workers), "nodes": dict(self.nodes)}


def open_board(ray: Any, on: str | None = None) -> Any:
    """The run's board, kept on node `on` (the driver's): it has no restarts, and holds what the streams did."""
    from kernelsage.scale.placement import pinned_to

    return ray.remote(num_cpus=0)(Board).options(**pinned_to(on)).remote()


def waiting_streams(snapshot: dict[str, Any], running: list[str], alive: set[str]) -> dict[str, str]:
    """The streams still to finish that are not running now, each with how it came to wait: not started yet
    (""), or its worker's node lost, so that Ray runs it again elsewhere."""
    waiting = {}
    for stream in running:
        node = snapshot.get("nodes", {}).get(stream)
        if stream not in snapshot.get("workers", {}):
            waiting[stream] = ""
        elif node is not None and node not in alive:
            waiting[stream] = "its node was lost, to run again elsewhere: "
    return waiting


def progress_events(before: dict[str, Any], after: dict[str, Any], totals: dict[str, int]) -> list[Event]:
    """What changed between two board snapshots, as events: where a stream (again) runs, its new round, its
    finished episodes.
    (The streams run in Ray workers, whose own events stay there; where no live board is drawn the driver
    prints these instead, kernelsage.cli.run_log.)"""
    from kernelsage.graph.runner_events import Event

    events = []
    for stream, total in totals.items():
        node, was = after.get("nodes", {}).get(stream), before.get("nodes", {}).get(stream)
        if node and node != was:
            again = f" again (it ran on node {was[:NODE_ID_CHARS]} before)" if was else ""
            events.append(Event("placed", f"{stream}: running{again} on node {node[:NODE_ID_CHARS]}",
                                {"stream": stream, "node": node, "pid": after.get("workers", {}).get(stream)}))
        detail = after["detail"].get(stream) or ""
        if detail and detail != before.get("detail", {}).get(stream):
            events.append(Event("progress", f"{stream}: {detail}", {"stream": stream, "detail": detail}))
        done, solved = after["done"].get(stream, (0, 0))
        if done > before.get("done", {}).get(stream, (0, 0))[0]:
            events.append(Event("episode_end", f"{stream}: {done} of {total} episodes finished, {solved} solved",
                                {"stream": stream, "done": done, "total": total, "solved": solved}))
    return events


class Display:
    """The driver's live display: one bar per stream, and the devices busy; each change is also an event."""

    def __init__(self, console: Console, streams: dict[str, int]) -> None:
        self.totals = dict(streams)
        self.seen: dict[str, Any] = {}
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total}"), TextColumn("{task.fields[detail]}"),
                                 TimeElapsedColumn(), console=console, transient=False)
        self.bars = {name: self.progress.add_task(name, total=total, detail="") for name, total in streams.items()}
        self.devices = self.progress.add_task("devices", total=None, detail="")

    def __enter__(self) -> Display:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def show(self, snapshot: dict[str, Any], busy: tuple[int, int] | None,
             waiting: dict[str, str] | None = None) -> None:
        """Draw the board's snapshot; a stream in `waiting` shows its text (why it waits) as its detail."""
        from kernelsage.graph.runner_events import emit

        if waiting:
            snapshot = {**snapshot, "detail": {**snapshot["detail"], **waiting}}
        for event in progress_events(self.seen, snapshot, self.totals):
            emit(event)
        self.seen = snapshot
        for name, bar in self.bars.items():
            done, solved = snapshot["done"].get(name, (0, 0))
            text = snapshot["detail"].get(name) or ""
            self.progress.update(bar, completed=done, detail=" | ".join(
                t for t in (text, f"solved {solved}/{done}" if done else "") if t))
        if busy is not None:
            self.progress.update(self.devices, detail=f"{busy[0]} of {busy[1]} busy")
