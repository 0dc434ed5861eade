"""Studies: policies x orders x seeds on one store, with intervals over seeds; and parameter sweeps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.evals.simulator.measures import learning_curve, stream_measures, summarise_seeds
from kernelsage.evals.simulator.run import StreamResult, StreamSpec, run_stream
from kernelsage.evals.simulator.standin import StandInConfig
from kernelsage.evals.simulator.world import WorldConfig
from kernelsage.memory_backend.params import ALIASES, SageParams
from kernelsage.memory_backend.policies import get_policy
from kernelsage.memory_backend.store import MemoryStore

Progress = Callable[[StreamSpec, StreamResult], None]
STANDIN_SETTINGS = tuple(f.name for f in fields(StandInConfig)
                         if f.name not in ("compile_logit", "correct_logit", "first_slowdown"))


@dataclass(frozen=True, kw_only=True)
class StudySpec:
    policies: tuple[str, ...]
    orders: tuple[str, ...]
    seeds: int
    episodes: int
    world: WorldConfig = field(default_factory=WorldConfig)
    standin: StandInConfig = field(default_factory=StandInConfig)
    params: SageParams = field(default_factory=SageParams)
    seed_items_per_lesson: int = 1
    first_seed: int = 0

    def __post_init__(self) -> None:
        if not self.policies or not self.orders:
            raise ConfigurationError("a simulation needs at least one policy and one order")
        for name in self.policies:
            get_policy(name)  # an unknown name lists the known ones
        if self.seeds < 1 or self.episodes < 1:
            raise ConfigurationError("--seeds and --episodes must be at least 1")

    def stream(self, policy: str, order: str, seed: int) -> StreamSpec:
        return StreamSpec(policy=policy, order=order, seed=seed, episodes=self.episodes, world=self.world,
                          standin=self.standin, params=self.params, seed_items_per_lesson=self.seed_items_per_lesson)

    def settings(self) -> dict[str, Any]:
        return {"policies": list(self.policies), "orders": list(self.orders), "seeds": self.seeds,
                "first_seed": self.first_seed, "episodes": self.episodes,
                "params": {f.name: getattr(self.params, f.name) for f in fields(self.params)},
                "standin": {name: getattr(self.standin, name) for name in STANDIN_SETTINGS},
                "world": {"operators": 3 * self.world.operators_per_level, "categories": self.world.categories,
                          "lessons": self.world.lessons, "dim": self.world.dim,
                          "kind_shares": dict(self.world.kind_shares)},
                "seed_items_per_lesson": self.seed_items_per_lesson}


def invariant_problems(result: StreamResult) -> list[str]:
    """Broken invariants of a stream: one commit per episode, utilities within the credit bounds, hot
    memory within its budget. Empty when all hold."""
    spec, problems = result.spec, []
    name = f"{spec.policy}/{spec.order}/seed {spec.seed}"
    if result.committed_episodes != spec.episodes or not all(r.memory.updated for r in result.records):
        problems.append(f"{name}: {result.committed_episodes} episodes committed for {spec.episodes} run")
    low = -max(spec.params.delta, spec.params.beta)
    if result.utility_range and not low - 1e-9 <= result.utility_range[0] <= result.utility_range[1] <= 1.0:
        problems.append(f"{name}: utilities span {result.utility_range}, outside [{low}, 1]")
    if result.max_hot_tokens > spec.params.hot_budget_tokens:
        problems.append(f"{name}: hot memory held {result.max_hot_tokens} tokens over B={spec.params.hot_budget_tokens}")
    return problems


@dataclass(kw_only=True)
class Study:
    """Measures per (order, policy) over seeds; the first seed's streams kept whole for the plots."""

    spec: StudySpec
    per_seed: dict[tuple[str, str], list[dict[str, float | None]]] = field(default_factory=dict)
    curves: dict[tuple[str, str], list[list[tuple[int, float]]]] = field(default_factory=dict)
    examples: dict[tuple[str, str], StreamResult] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def summary(self, order: str) -> dict[str, dict[str, Any]]:
        return {policy: summarise_seeds(self.per_seed[(order, policy)]) for policy in self.spec.policies}

    def to_json(self) -> dict[str, Any]:
        """`policies` holds the first order's figures; `orders` every order's."""
        orders = {order: {"policies": self.summary(order)} for order in self.spec.orders}
        return {"order": self.spec.orders[0], "policies": orders[self.spec.orders[0]]["policies"], "orders": orders,
                "settings": self.spec.settings(), "invariant_problems": list(self.problems),
                "model": "stand-in (simulated generator; no language model)"}


def run_study(store: MemoryStore, spec: StudySpec, *, progress: Progress | None = None,
              keep_examples: bool = True) -> Study:
    """Every policy on every order for every seed; each stream in a fresh namespace of its own."""
    study = Study(spec=spec)
    for order in spec.orders:
        for policy in spec.policies:
            for seed in range(spec.first_seed, spec.first_seed + spec.seeds):
                stream = spec.stream(policy, order, seed)
                result = run_stream(store, stream)
                study.per_seed.setdefault((order, policy), []).append(stream_measures(result))
                study.curves.setdefault((order, policy), []).append(learning_curve(result))
                study.problems += invariant_problems(result)
                if keep_examples and seed == spec.first_seed:
                    study.examples[(order, policy)] = result
                if progress:
                    progress(stream, result)
    return study


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """`NAME=V1,V2,...` for a SageParams field (the method's names B, K_ado, ... too) or a stand-in setting."""
    name, sep, raw = text.partition("=")
    name = ALIASES.get(name.strip(), name.strip())
    known = {f.name for f in fields(SageParams)} | set(STANDIN_SETTINGS)
    if not sep or name not in known:
        raise ConfigurationError(f"cannot read sweep {text!r}: write NAME=V1,V2,... with NAME one of "
                                 f"{', '.join(sorted(known | set(ALIASES)))}")
    try:
        values = [float(v) for v in raw.replace(",", " ").split()]
    except ValueError:
        raise ConfigurationError(f"sweep {text!r}: the values must be numbers") from None
    if not values:
        raise ConfigurationError(f"sweep {text!r} gives no values")
    for value in values:
        _with_value(StudySpec(policies=("sage",), orders=("mixed",), seeds=1, episodes=1), name, value)  # validates
    return name, values


def _with_value(spec: StudySpec, name: str, value: float) -> StudySpec:
    if name in STANDIN_SETTINGS:
        return replace(spec, standin=spec.standin.with_overrides(**{name: value}))
    kind = next(f.type for f in fields(SageParams) if f.name == name)
    return replace(spec, params=spec.params.with_overrides(**{name: int(value) if kind in (int, "int") else value}))


@dataclass(kw_only=True)
class Sweep:
    name: str
    values: list[float]
    order: str
    studies: list[Study]

    def to_json(self) -> dict[str, Any]:
        policies = self.studies[0].spec.policies
        return {"parameter": self.name, "values": self.values, "order": self.order,
                "policies": {p: [s.summary(self.order)[p] for s in self.studies] for p in policies}}


def run_sweep(store: MemoryStore, spec: StudySpec, name: str, values: Sequence[float], *,
              progress: Progress | None = None) -> Sweep:
    """The study on its first order once per value of one parameter, everything else fixed."""
    order = spec.orders[0]
    studies = [run_study(store, replace(_with_value(spec, name, v), orders=(order,)), progress=progress,
                         keep_examples=False) for v in values]
    return Sweep(name=name, values=list(values), order=order, studies=studies)
