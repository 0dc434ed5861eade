"""The simulator report's plots, in the style of the stream report (evals.report_plots)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from kernelsage.evals.report_plots import _DPI, _STYLE, _note
from kernelsage.evals.simulator.run import StreamResult
from kernelsage.evals.simulator.study import Study, Sweep

SWEEP_MEASURES = (("er", "ER"), ("credit_accuracy", "credit accuracy"), ("hot_precision", "hot precision"))


def _save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(figure)
    return path


def _draw(path: Path, draw: Callable[[], Figure]) -> Path:
    with plt.rc_context(_STYLE):
        return _save(draw(), path)


def _learning_curves(study: Study) -> Figure:
    orders = study.spec.orders
    figure, axes = plt.subplots(1, len(orders), figsize=(4.2 * len(orders), 3.4), squeeze=False, sharey=True)
    for ax, order in zip(axes[0], orders, strict=True):
        for policy in study.spec.policies:
            curves = study.curves.get((order, policy), [])
            if not curves:
                continue
            xs = [x for x, _ in curves[0]]
            ys = np.mean([[y for _, y in c] for c in curves if len(c) == len(xs)], axis=0)
            ax.plot(xs, 100 * ys, marker=".", label=policy)
        ax.set(title=f"order {order}", xlabel="episodes", ylim=(-2, 102))
    axes[0][0].set_ylabel("ER in window (%), mean over seeds")
    axes[0][-1].legend(loc="lower right", fontsize=7)
    figure.tight_layout()
    return figure


def _examples_with(study: Study, order: str, field: str) -> list[tuple[str, StreamResult]]:
    """(policy, example run on `order`) for each policy whose example run has a non-empty `field`."""
    return [(policy, study.examples[(order, policy)]) for policy in study.spec.policies
            if (order, policy) in study.examples and getattr(study.examples[(order, policy)], field)]


def _scatter(study: Study) -> Figure:
    order = study.spec.orders[0]
    shown = _examples_with(study, order, "learned")
    figure, axes = plt.subplots(1, max(1, len(shown)), figsize=(3.4 * max(1, len(shown)), 3.2), squeeze=False)
    if not shown:
        _note(axes[0][0], "no policy learns a score")
    for ax, (policy, result) in zip(axes[0], shown, strict=False):
        pairs = [(result.truth.true_value(i), s) for i, s in result.learned.items() if result.truth.exposures.get(i)]
        if pairs:
            ax.scatter([p[0] for p in pairs], [p[1] for p in pairs], s=6, alpha=0.4)
        ax.set(title=policy, xlabel="true value where shown", ylabel="learned utility (Q for value)")
    figure.suptitle(f"Learned score vs true value (order {order}, seed {study.spec.first_seed})", fontsize=9)
    figure.tight_layout()
    return figure


def _hot_composition(study: Study) -> Figure:
    order = study.spec.orders[0]
    shown = _examples_with(study, order, "hot_timeline")
    figure, axes = plt.subplots(max(1, len(shown)), 1, figsize=(7, 2.3 * max(1, len(shown))), squeeze=False)
    if not shown:
        _note(axes[0][0], "no policy keeps a hot memory")
    for ax, (policy, result) in zip(axes[:, 0], shown, strict=False):
        timeline = result.hot_timeline
        xs = [p.episode for p in timeline]
        ax.stackplot(xs, [p.helpful for p in timeline], [p.neutral for p in timeline], [p.harmful for p in timeline],
                     labels=["helpful", "neutral", "harmful"], colors=["C2", "0.7", "C3"], alpha=0.8)
        ax.set(title=f"{policy}: resident rules by true value (order {order})", xlabel="episodes", ylabel="rules")
        tokens = ax.twinx()
        tokens.plot(xs, [p.tokens for p in timeline], color="k", linewidth=1, label="hot tokens")
        tokens.axhline(result.spec.params.hot_budget_tokens, color="k", linestyle=":", linewidth=0.8)
        tokens.set_ylabel("tokens")
        tokens.grid(False)
        ax.legend(loc="upper left", fontsize=7)
    figure.tight_layout()
    return figure


def _sweep(sweep: Sweep) -> Figure:
    figure, axes = plt.subplots(1, len(SWEEP_MEASURES), figsize=(4 * len(SWEEP_MEASURES), 3.2), squeeze=False)
    data = sweep.to_json()["policies"]
    for ax, (key, label) in zip(axes[0], SWEEP_MEASURES, strict=True):
        for policy, summaries in data.items():
            points = [(v, s[key]) for v, s in zip(sweep.values, summaries, strict=True) if s[key]["mean"] is not None]
            if not points:
                continue
            xs = [v for v, _ in points]
            means = np.array([s["mean"] for _, s in points])
            errors = np.array([[m - s["low"] if s["low"] is not None else 0.0
                                for m, (_, s) in zip(means, points, strict=True)],
                               [s["high"] - m if s["high"] is not None else 0.0
                                for m, (_, s) in zip(means, points, strict=True)]])
            ax.errorbar(xs, means, yerr=errors, marker="o", capsize=3, label=policy)
        ax.set(title=label, xlabel=sweep.name)
        if not ax.lines:
            _note(ax, "not defined for these policies")
    axes[0][0].legend(loc="best", fontsize=7)
    figure.suptitle(f"Sweep of {sweep.name} (order {sweep.order}; mean and 95% interval over seeds)", fontsize=9)
    figure.tight_layout()
    return figure


def plot_study(study: Study, sweeps: Sequence[Sweep], plots_dir: Path) -> list[tuple[str, Path]]:
    """Every plot of a simulation report; (caption, file) pairs in report order."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    drawn = [
        ("Learning curves: ER along the stream per policy", _draw(plots_dir / "learning_curves.png",
                                                                  lambda: _learning_curves(study))),
        ("Learned utility vs true value", _draw(plots_dir / "utility_vs_true_value.png", lambda: _scatter(study))),
        ("Hot-memory composition over time", _draw(plots_dir / "hot_composition.png", lambda: _hot_composition(study))),
    ]
    for sweep in sweeps:
        drawn.append((f"Sweep of {sweep.name}", _draw(plots_dir / f"sweep_{sweep.name}.png", partial(_sweep, sweep))))
    return drawn
