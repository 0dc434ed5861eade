"""The tuning search's defaults, in one place (light: the command line reads them without loading a backend)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelsage.errors import ConfigurationError


@dataclass(frozen=True)
class TuningParams:
    """`budget`: compiles plus profiles a run may spend (a new configuration costs a compile and a profile, a
    repeated profile one); `parents`: the fastest configurations whose neighbours each exploration step tries;
    `finalists`: the configurations successive halving starts from, the default among them; `rung_growth`: how
    many times the timed calls of the rung before each halving rung's profiles make (narrower intervals for
    fewer configurations), within `rung_seconds` of timed calls per profile (a slow kernel stays within the
    sandbox's time limit); `final_rounds`: how many times the best and the default are then profiled one after
    the other (the paired rounds that decide, docs/tuning.md)."""

    budget: int = 32
    parents: int = 2
    finalists: int = 3
    rung_growth: int = 2
    rung_seconds: float = 10.0
    final_rounds: int = 4


DEFAULT_BUDGET = TuningParams().budget
FIRST_COST = 2  # a configuration's first evaluation: one compile, one profile (the least budget that tunes)


def check_episode_budget(budget: int) -> None:
    """An episode's tuning budget is 0 (no tuning) or enough for the default's first evaluation."""
    if budget < 0 or 0 < budget < FIRST_COST:
        raise ConfigurationError(f"tuning budget {budget}: give 0 (no tuning) or at least {FIRST_COST} (one "
                                 "compile and one profile of the default)")
