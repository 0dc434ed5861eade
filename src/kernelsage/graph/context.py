"""Run-time settings of an episode, passed as LangGraph's `context` (not through `configurable`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend.params import DEFAULT_NAMESPACE, parse_overrides
from kernelsage.tuning.params import check_episode_budget


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


@dataclass(kw_only=True)
class Context:
    """Settings a host may change per run; defaults come from the environment."""

    namespace: str = field(default_factory=lambda: os.environ.get("KERNELSAGE_NAMESPACE", DEFAULT_NAMESPACE))
    policy: str = field(default_factory=lambda: os.environ.get("KERNELSAGE_POLICY", "sage"))
    budget: int = field(default_factory=lambda: _env_int("KERNELSAGE_BUDGET", 30))  # T, candidates per episode
    early_stop_speedup: float | None = None  # stop refining once best beats the reference by this factor
    # Compiles plus profiles the tuning step may spend on the episode's first correct kernel that declares
    # tunables (docs/tuning.md); 0 (the default) = no tuning. Charged to `budget` at one round per two.
    tuning_budget: int = field(default_factory=lambda: _env_int("KERNELSAGE_TUNING_BUDGET", 0))
    max_gate_asks: int = 2  # re-asks for missing or unknown adoption ids before the round fails
    max_parse_retries: int = 2  # re-asks for a malformed answer before the round fails
    top_k: int | None = None  # cold items shown per round (None: the memory's default)
    seed: int = 0
    consolidate: bool = True  # run UGC after the episode (off for frozen memories)
    seed_knowledge: bool = True  # a fresh namespace starts from the backend's knowledge pack
    # Memory hyperparameters for this run (SageParams overrides, e.g. {"gamma": 0.5, "hot_budget_tokens": 4000});
    # KERNELSAGE_PARAMS="gamma=0.5,B=4000" sets them from the environment. Each episode records them.
    params: dict[str, Any] = field(default_factory=lambda: parse_overrides(os.environ.get("KERNELSAGE_PARAMS", "")))

    def __post_init__(self) -> None:
        check_episode_budget(self.tuning_budget)
        self.params = parse_overrides([f"{k}={v}" for k, v in self.params.items()])  # checked, method names too
        # T is the budget: a `rounds` parameter sets it, and the budget is recorded as `rounds`.
        rounds = self.params.get("rounds")
        if rounds is not None and rounds != self.budget:
            if self.budget != _env_int("KERNELSAGE_BUDGET", 30):
                raise ConfigurationError(f"budget={self.budget} and parameter rounds (T)={rounds} disagree: "
                                         "give one of them")
            self.budget = rounds
        self.params["rounds"] = self.budget


def resolve_context(run_context: Any, default: Context) -> Context:
    """kernelsage's settings for a run.

    Under kernelsage's own context schema that is the run's `Context`. Inside a host graph with another
    context schema it is the host context's `kernelsage` attribute (or key) when that holds a `Context`,
    else `default`, the settings the graph was built with.
    """
    if isinstance(run_context, Context):
        return run_context
    nested = run_context.get("kernelsage") if isinstance(run_context, dict) else getattr(run_context, "kernelsage", None)
    return nested if isinstance(nested, Context) else default
