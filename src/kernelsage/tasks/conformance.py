"""Whether a backend can run each task of a suite's checkout as the suite's own harness would, and if not why,
in one line (`kernelsage tasks conform`). Nothing is built and no kernel runs: the tasks are loaded, their cases
described as a stream would (`interface.task_runs`: shapes on the meta device, small cases run on the CPU), and
each way the suite runs the backend's kernels (a "route") is asked about the task by a check of the backend's
own (given by the caller: the tasks package knows no backend).

The routes, from the checkout's own declarations (`loaders.tracks`): KernelBench and MultiKernelBench run a
kernel language through a declared track (MultiKernelBench's `ascendc` and `ascendc_direct_launch` for the
ascend backend, `triton` and `triton_ascend` for triton); NPUKernelBench's whole harness builds Ascend C
operators (the ascend backend, and no Triton track); kernelsage's own suite is run by every backend. A task is
runnable when it loads, its cases can be made and its reference runs (as far as can be told without an
accelerator), and at least one route's check passes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelsage.tasks.interface import task_runs
from kernelsage.tasks.loaders.common import LoadReport
from kernelsage.tasks.loaders.tracks import Track, track_for
from kernelsage.tasks.model import Task

# A route's check: (the task, its cases as `task_runs` describes them) -> '' when it runs, else why not.
RouteCheck = Callable[[Task, list[dict[str, Any]]], str]
SUITE_HARNESS = {"npukernelbench": ("NPUKernelBench", "ascend"), "suite": ("kernelsage", None)}


@dataclass(frozen=True)
class Verdict:
    """One task: runnable or not, the one-line reason where not, and each route's answer ('' = runs)."""

    task: str
    level: int
    runnable: bool
    reason: str = ""
    routes: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.task, "level": self.level, "runnable": self.runnable, "reason": self.reason or None,
                "routes": dict(self.routes)}


@dataclass(frozen=True)
class Conformance:
    """Every task of a checkout judged for one backend."""

    suite: str
    format: str
    backend: str
    routes: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    no_route: str = ""  # why the checkout offers the backend no route at all

    def summary(self) -> dict[str, Any]:
        """Counts: tasks, runnable, refused, refusals by the kind of reason (the words before its first colon),
        and runnable tasks per route."""
        refused = [v for v in self.verdicts if not v.runnable]
        kinds = Counter(v.reason.split(":", 1)[0] for v in refused)
        per_route = {route: sum(1 for v in self.verdicts if v.routes.get(route) == "") for route in self.routes}
        return {"tasks": len(self.verdicts), "runnable": len(self.verdicts) - len(refused), "refused": len(refused),
                "by_reason": dict(kinds.most_common()), "runnable_by_route": per_route}

    def to_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "format": self.format, "backend": self.backend, "routes": list(self.routes),
                "no_route": self.no_route or None, "tasks": [v.to_dict() for v in self.verdicts],
                "summary": self.summary()}


def harness_routes(format: str, tracks: list[Track], backend: str) -> tuple[tuple[str, ...], str]:
    """The ways the checkout runs `backend`'s kernels (its tracks for it, or its whole harness), and why it
    has none where it has none."""
    if format in SUITE_HARNESS:
        name, only = SUITE_HARNESS[format]
        if only is None or only == backend:
            return (name,), ""
        return (), f"no {backend} route: {name}'s harness builds {only} kernels only and declares no tracks"
    languages = tuple(track.language for track in track_for(tracks, backend))
    if languages:
        return languages, ""
    declared = ", ".join(track.language for track in tracks) or "none"
    return (), f"no {backend} route: this {format} checkout declares no track kernelsage's {backend} backend " \
               f"writes (its tracks: {declared})"


def conform(report: LoadReport, *, suite: str, format: str, backend: str,
            checks: Mapping[str, RouteCheck]) -> Conformance:
    """Every task of `report` (those that did not load too) judged on the checkout's routes for `backend`;
    `checks` gives the backend's check per route name (a route without one runs what loads and runs)."""
    routes, no_route = harness_routes(format, report.tracks, backend)
    verdicts = [Verdict(problem.task_id or problem.path, problem.level, False,
                        "does not load: " + _line(problem.message)) for problem in report.problems]
    for task in report.tasks:
        verdicts.append(_verdict(task, routes, no_route, checks))
    verdicts.sort(key=lambda v: (v.level, v.task))
    return Conformance(suite, format, backend, routes, tuple(verdicts), no_route)


def _verdict(task: Task, routes: tuple[str, ...], no_route: str, checks: Mapping[str, RouteCheck]) -> Verdict:
    if not routes:
        return Verdict(task.id, task.level, False, no_route)
    cases, problem = task_runs(task)
    if problem:
        return Verdict(task.id, task.level, False, "its reference cannot run where kernelsage computes it (the CPU): "
                       + _line(problem))
    answers = {route: _line(checks[route](task, cases)) if route in checks else "" for route in routes}
    if any(answer == "" for answer in answers.values()):
        return Verdict(task.id, task.level, True, "", answers)
    distinct = set(answers.values())  # one reason where every route gives the same
    reason = distinct.pop() if len(distinct) == 1 else "; ".join(f"{route}: {why}" for route, why in answers.items())
    return Verdict(task.id, task.level, False, reason, answers)


def _line(text: str, limit: int = 300) -> str:
    """The first line of a message, shortened: a reason is one line."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."
