"""The report's plots, drawn with matplotlib (Agg) and saved as PNG; missing data gets a note."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # reports are written on servers and in CI: never open a window

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kernelsage.evals.metrics import (
    cumulative_adoption_rate,
    cumulative_er,
    deduplicate,
    measured_speedup,
)
from kernelsage.evals.records import EpisodeRecord

RecordsByPolicy = Mapping[str, Sequence[EpisodeRecord]]

# Fixed so that the images do not depend on the machine's matplotlib settings.
_DPI = 100
_STYLE = {"font.size": 9, "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": _DPI}


def plot_all(records_by_policy: RecordsByPolicy, plots_dir: Path) -> list[tuple[str, Path]]:
    """Draw every plot into `plots_dir`; returns (caption, file) pairs in report order."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    drawn = []
    for name, caption, draw in _PLOTS:
        with plt.rc_context(_STYLE):
            figure = draw(records_by_policy)
            path = plots_dir / f"{name}.png"
            figure.savefig(path, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
            plt.close(figure)
        drawn.append((caption, path))
    return drawn


def _note(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _plot_cumulative_er(records_by_policy: RecordsByPolicy) -> Figure:
    figure, ax = plt.subplots(figsize=(7, 3.5))
    for policy, records in records_by_policy.items():
        values = cumulative_er(records)
        if values:
            ax.plot(range(1, len(values) + 1), [100 * v for v in values], marker=".", label=policy)
    if ax.lines:
        ax.set(xlabel="operators in the stream", ylabel="cumulative ER (%)", ylim=(-2, 102))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(loc="best")
    else:
        _note(ax, "no episodes")
    ax.set_title("Cumulative execution rate along the stream")
    return figure


def _plot_speedups(records_by_policy: RecordsByPolicy) -> Figure:
    tasks: dict[str, int] = {}  # task id -> first position in any policy's stream
    for records in records_by_policy.values():
        for record in deduplicate(records):
            tasks[record.task_id] = min(tasks.get(record.task_id, record.position), record.position)
    order = sorted(tasks, key=lambda task_id: (tasks[task_id], task_id))
    figure, ax = plt.subplots(figsize=(min(20.0, max(7.0, 2 + 0.3 * len(order))), 3.8))
    if not order:
        _note(ax, "no episodes")
        ax.set_title("Speedup over the reference per operator")
        return figure
    width = 0.8 / max(1, len(records_by_policy))
    for index, (policy, records) in enumerate(records_by_policy.items()):
        by_task = {record.task_id: measured_speedup(record) for record in deduplicate(records)}
        offset = (index - (len(records_by_policy) - 1) / 2) * width
        xs = [i + offset for i, task_id in enumerate(order) if by_task.get(task_id) is not None]
        heights = [math.log2(s) for s in (by_task.get(task_id) for task_id in order) if s is not None]
        ax.bar(xs, heights, width=width, color=f"C{index}", label=policy)
        # A missing speedup (unsolved or unmeasured) would look like a speedup of exactly 1x: mark it.
        missing = [i + offset for i, task_id in enumerate(order) if by_task.get(task_id) is None]
        ax.plot(missing, [0] * len(missing), "x", color=f"C{index}", markersize=5)
    ax.axhline(0, color="0.3", linewidth=0.8)
    ax.set_xticks(range(len(order)), order, rotation=60, ha="right", fontsize=7)
    ax.set(ylabel="log2(T_reference / T_best)",
           title="Speedup over the reference per operator (x: unsolved or not measured)")
    ax.legend(loc="best")
    return figure


def _plot_hot_memory(records_by_policy: RecordsByPolicy) -> Figure:
    policies = list(records_by_policy) or ["(no policy)"]
    figure, axes = plt.subplots(len(policies), 1, figsize=(7, 2.4 * len(policies)), squeeze=False)
    for ax, policy in zip(axes[:, 0], policies, strict=True):
        snapshots = [(r.position, r.memory_after) for r in deduplicate(records_by_policy.get(policy, []))]
        snapshots = [(position, after) for position, after in snapshots if after is not None]
        ax.set_title(f"{policy}: memory after each episode")
        if not snapshots:
            _note(ax, "no memory data")
            continue
        positions = [position + 1 for position, _ in snapshots]
        ax.stackplot(
            positions,
            [after.by_state.hot for _, after in snapshots],
            [after.by_state.validated for _, after in snapshots],
            [after.by_state.cold for _, after in snapshots],
            labels=["hot", "validated", "cold"],
            alpha=0.7,
        )
        ax.set(xlabel="operators in the stream", ylabel="items")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        tokens_ax = ax.twinx()
        tokens_ax.plot(positions, [after.hot_tokens for _, after in snapshots], color="k", marker=".",
                       label="hot tokens")
        tokens_ax.set_ylabel("hot tokens")
        tokens_ax.grid(False)
        handles, labels = ax.get_legend_handles_labels()
        token_handles, token_labels = tokens_ax.get_legend_handles_labels()
        ax.legend(handles + token_handles, labels + token_labels, loc="upper left", fontsize=7)
    figure.tight_layout()
    return figure


def _plot_utilities(records_by_policy: RecordsByPolicy) -> Figure:
    figure, ax = plt.subplots(figsize=(7, 3.5))
    last_utilities = {}
    for policy, records in records_by_policy.items():
        snapshots = [r.memory_after for r in deduplicate(records) if r.memory_after is not None]
        if snapshots and snapshots[-1].utilities:
            last_utilities[policy] = snapshots[-1].utilities
    ax.set_title("Utility distribution at the end of the stream")
    if not last_utilities:
        _note(ax, "no memory data")
        return figure
    edges = histogram_edges([u for utilities in last_utilities.values() for u in utilities])
    for index, (policy, utilities) in enumerate(last_utilities.items()):
        counts, _ = np.histogram(utilities, bins=edges)
        label = f"{policy} ({len(utilities)} items, range {min(utilities):+.3f} to {max(utilities):+.3f})"
        ax.stairs(counts, edges, linewidth=1.5, color=f"C{index}", label=label)
    ax.set(xlabel="utility", ylabel="items")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="best", fontsize=7)
    return figure


def histogram_edges(values: Sequence[float], bins: int = 20) -> np.ndarray:
    """Equal bins whose outer edges are exactly the smallest and the largest value (numpy counts the last
    edge in the last bin, so the maximum is never dropped); one unit-wide bin when all values are equal."""
    low, high = float(min(values)), float(max(values))
    if high - low <= 1e-9 * max(1.0, abs(low), abs(high)):  # equal up to rounding (e.g. -0.2 and -0.2000...04)
        return np.array([low - 0.5, low + 0.5])
    return np.histogram_bin_edges(np.asarray(values, dtype=float), bins=bins, range=(low, high))


def _plot_adoption(records_by_policy: RecordsByPolicy) -> Figure:
    figure, ax = plt.subplots(figsize=(7, 3.5))
    without_data = []
    for policy, records in records_by_policy.items():
        rates = cumulative_adoption_rate(records)
        points = [(k, 100 * rate) for k, rate in enumerate(rates, start=1) if rate is not None]
        if points:
            ax.plot([k for k, _ in points], [rate for _, rate in points], marker=".", label=policy)
        else:
            without_data.append(policy)
    ax.set_title("Cumulative adoption rate (adopted / shown items)")
    if ax.lines:
        ax.set(xlabel="operators in the stream", ylabel="adoption rate (%)", ylim=(-2, 102))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(loc="best")
        if without_data:
            ax.text(0.01, 0.02, "no adoption data: " + ", ".join(without_data), transform=ax.transAxes,
                    fontsize=7, color="0.4")
    else:
        _note(ax, "no adoption data")
    return figure


_PLOTS: list[tuple[str, str, Callable[[RecordsByPolicy], Figure]]] = [
    ("cumulative_er", "Cumulative ER along the stream", _plot_cumulative_er),
    ("speedup_log2", "log2 speedup over the reference per operator", _plot_speedups),
    ("hot_memory", "Hot-memory size and composition over episodes", _plot_hot_memory),
    ("utilities", "Utility distribution after the last episode", _plot_utilities),
    ("adoption", "Adoption rate along the stream", _plot_adoption),
]
