"""Studies: policies x orders x seeds on one store, with intervals over seeds; and parameter sweeps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.evals.simulator.dispatch import Dispatch, StreamOutcome, in_process
from kernelsage.evals.simulator.measures import summarise_seeds
from kernelsage.evals.simulator.mined import WarmStart
from kernelsage.evals.simulator.run import StreamResult, StreamSpec
from kernelsage.evals.simulator.standin import StandInConfig
from kernelsage.evals.simulator.world import WorldConfig
from kernelsage.memory_backend.params import ALIASES, SageParams
from kernelsage.memory_backend.policies import get_policy
from kernelsage.memory_backend.store import MemoryStore

Progress = Callable[[StreamSpec, StreamOutcome], None]
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
    warm_start: WarmStart | None = None  # every policy starts from the same mined lessons (None: the pack alone)

    def __post_init__(self) -> None:
        if not self.policies or not self.orders:
            raise ConfigurationError("a simulation needs at least one policy and one order")
        for name in self.policies:
            get_policy(name)  # an unknown name lists the known ones
        if self.seeds < 1 or self.episodes < 1:
            raise ConfigurationError("--seeds and --episodes must be at least 1")

    def stream(self, policy: str, order: str, seed: int) -> StreamSpec:
        return StreamSpec(policy=policy, order=order, seed=seed, episodes=self.episodes, world=self.world,
                          standin=self.standin, params=self.params, seed_items_per_lesson=self.seed_items_per_lesson,
                          warm_start=self.warm_start)

    def settings(self) -> dict[str, Any]:
        return {"policies": list(self.policies), "orders": list(self.orders), "seeds": self.seeds,
                "first_seed": self.first_seed, "episodes": self.episodes,
                "params": {f.name: getattr(self.params, f.name) for f in fields(self.params)},
                "standin": {name: getattr(self.standin, name) for name in STANDIN_SETTINGS},
                "world": {"operators": 3 * self.world.operators_per_level, "categories": self.world.categories,
                          "lessons": self.world.lessons, "dim": self.world.dim,
                          "kind_shares": dict(self.world.kind_shares)},
                "seed_items_per_lesson": self.seed_items_per_lesson,
                "warm_start": None if self.warm_start is None else asdict(self.warm_start)}


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


def study_streams(spec: StudySpec) -> list[StreamSpec]:
    """Every stream of the study: each policy on each order for each seed."""
    return [spec.stream(policy, order, seed) for order in spec.orders for policy in spec.policies
            for seed in range(spec.first_seed, spec.first_seed + spec.seeds)]


def run_study(store: MemoryStore, spec: StudySpec, *, progress: Progress | None = None,
              keep_examples: bool = True, dispatch: Dispatch | None = None) -> Study:
    """Every policy on every order for every seed; each stream in a fresh namespace of its own, run by
    `dispatch` (default: one after another on `store`). The streams are independent, so the figures are
    the same whatever runs them and in whatever order they end."""
    study = Study(spec=spec)
    streams = study_streams(spec)
    outcomes: dict[tuple[str, str, int], StreamOutcome] = {}

    def keep(stream: StreamSpec) -> bool:  # the first seed's streams are kept whole, for the plots
        return keep_examples and stream.seed == spec.first_seed

    for outcome in (dispatch or in_process(store, keep))(streams):
        outcomes[(outcome.spec.order, outcome.spec.policy, outcome.spec.seed)] = outcome
        if progress:
            progress(outcome.spec, outcome)
    for stream in streams:  # in the study's order: per-seed values line up across policies
        outcome = outcomes[(stream.order, stream.policy, stream.seed)]
        study.per_seed.setdefault((stream.order, stream.policy), []).append(outcome.measures)
        study.curves.setdefault((stream.order, stream.policy), []).append(outcome.curve)
        study.problems += outcome.problems
        if outcome.example is not None:
            study.examples[(stream.order, stream.policy)] = outcome.example
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
              progress: Progress | None = None, dispatch: Dispatch | None = None) -> Sweep:
    """The study on its first order once per value of one parameter, everything else fixed."""
    order = spec.orders[0]
    studies = [run_study(store, replace(_with_value(spec, name, v), orders=(order,)), progress=progress,
                         keep_examples=False, dispatch=dispatch) for v in values]
    return Sweep(name=name, values=list(values), order=order, studies=studies)
