"""A stochastic STAND-IN for the generator model (no language model is involved).

It decides which shown items it really uses (more likely the more an item is truly worth, up to a
capacity), declares adoption with noise (false claims, silent use), and draws each round's compile,
correctness and timing outcomes from chances that move with the summed true value of what it used. Its
successes teach new lessons, derived from what it used. Pure functions of their arguments and of draws
made for them (draws.py): per-item uniforms, or a generator of the episode's own stream whose draws are
indexed by round, so the simulator replays exactly from a seed and two policies in the same episode meet
the same chances (common random numbers: an outcome moves only where what was used moves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend.records import RoundOutcome

STANDIN_MODEL = "stand-in:simulated-generator"  # the model name every simulated record carries


@dataclass(frozen=True, kw_only=True)
class StandInConfig:
    """The stand-in's behaviour; each value is an assumption stated in docs/simulator.md."""

    use_base: float = 0.3  # chance to use a shown item worth nothing to this operator
    discernment: float = 0.2  # added to that chance per unit of the item's true value
    capacity: int = 4  # at most this many items used per stage (a bounded attention)
    false_claim: float = 0.05  # declares "adopted" for an item it did not use
    silent_use: float = 0.05  # declares "not adopted" for an item it used
    effect: float = 1.0  # logit change of correctness (half of it for compiling) per unit of used value
    compile_logit: tuple[float, float, float] = (1.5, 0.8, 0.2)  # by level, with nothing used
    correct_logit: tuple[float, float, float] = (-2.1, -2.5, -3.0)  # correct given compiled, by level
    first_slowdown: tuple[float, float, float] = (0.3, 0.6, 0.9)  # mean log(T_first / T_reference), by level
    improve_logit: float = -1.5  # chance that a refining round finds a faster kernel, nothing used
    refine_correct: float = 0.8  # chance that a refining candidate stays correct
    timing_noise: float = 0.03  # log-normal spread of each latency measurement
    reuse_rate: float = 0.5  # a new lesson restates a helpful item it used (else it is discovered)
    spurious_rate: float = 0.2  # a discovered lesson is a random one (the curator drew the wrong lesson)

    def __post_init__(self) -> None:
        rates = ("use_base", "discernment", "false_claim", "silent_use", "refine_correct", "reuse_rate",
                 "spurious_rate")
        bad = [f"{name}={getattr(self, name)}" for name in rates if not 0.0 <= getattr(self, name) <= 1.0]
        if self.capacity < 1 or self.timing_noise < 0 or self.effect < 0:
            bad.append("capacity >= 1, timing_noise >= 0 and effect >= 0 are required")
        if bad:
            raise ConfigurationError("invalid stand-in settings: " + ", ".join(bad) + " (rates lie in [0, 1])")

    def with_overrides(self, **overrides: float) -> StandInConfig:
        known = {f.name for f in fields(self)} - {"compile_logit", "correct_logit", "first_slowdown"}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigurationError(f"unknown stand-in setting(s) {', '.join(unknown)}; use {', '.join(sorted(known))}")
        converted: dict[str, Any] = {k: (int(v) if k == "capacity" else float(v)) for k, v in overrides.items()}
        return replace(self, **converted)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def choose_used(values: np.ndarray, config: StandInConfig, draws: np.ndarray) -> np.ndarray:
    """Which shown items the stand-in really uses: each with chance use_base + discernment * value
    (clipped to [0.02, 0.98]), then at most `capacity` of them, kept at random. `draws` holds two uniforms
    per item (draws.item_uniforms): whether it is used, and its place in the random keep order."""
    chance = np.clip(config.use_base + config.discernment * values, 0.02, 0.98)
    used = draws[:, 0] < chance
    picked = np.flatnonzero(used)
    if len(picked) > config.capacity:  # keep the used items with the lowest keep draws: a uniform subset
        used[:] = False
        used[picked[np.argsort(draws[picked, 1], kind="stable")[: config.capacity]]] = True
    return used


def declare(used: np.ndarray, config: StandInConfig, draws: np.ndarray) -> np.ndarray:
    """The declared adoption: true use, except silent use (used, declared not) and false claims; one
    uniform per item."""
    return np.where(used, draws >= config.silent_use, draws < config.false_claim)


@dataclass(frozen=True, kw_only=True)
class Draft:
    rounds: list[RoundOutcome]
    first_correct: int | None  # the round of the first correct kernel
    fixed_compile: bool  # a failed compile was followed by a compiling candidate
    fixed_wrong: bool  # a wrong result was followed by a correct one


def draft(level: int, effect: float, budget: int, config: StandInConfig, rng: np.random.Generator) -> Draft:
    """Drafting rounds until the first correct kernel or the budget: each round compiles with chance
    sigmoid(compile_logit + effect/2) and is then correct with chance sigmoid(correct_logit + effect)."""
    p_compile = _sigmoid(config.compile_logit[level - 1] + 0.5 * config.effect * effect)
    p_correct = _sigmoid(config.correct_logit[level - 1] + config.effect * effect)
    # Two uniforms per round, drawn whether or not they are needed: round r meets the same chances in
    # every policy's episode, so a larger effect can only make more rounds correct.
    draws = rng.random((budget, 2))
    rounds: list[RoundOutcome] = []
    fixed_compile = fixed_wrong = False
    failed_compile = wrong = False
    for round_no in range(1, budget + 1):
        compiled = bool(draws[round_no - 1, 0] < p_compile)
        correct = compiled and bool(draws[round_no - 1, 1] < p_correct)
        fixed_compile |= compiled and failed_compile
        fixed_wrong |= correct and wrong
        failed_compile |= not compiled
        wrong |= compiled and not correct
        rounds.append(RoundOutcome(round=round_no, stage="draft", compiled=compiled, correct=correct))
        if correct:
            return Draft(rounds=rounds, first_correct=round_no, fixed_compile=fixed_compile, fixed_wrong=fixed_wrong)
    return Draft(rounds=rounds, first_correct=None, fixed_compile=fixed_compile, fixed_wrong=fixed_wrong)


def measured(latency: float, config: StandInConfig, z: float) -> float:
    """A latency as measured: log-normal noise of spread timing_noise, from a standard normal draw z."""
    return latency * math.exp(config.timing_noise * z)


@dataclass(frozen=True, kw_only=True)
class Refinement:
    rounds: list[RoundOutcome]  # the draft's rounds with latencies, then the refining rounds
    t_first: float
    t_best: float
    made_faster: bool


def refine(found: Draft, level: int, t_reference: float, effect: float, budget: int, config: StandInConfig,
           rng: np.random.Generator) -> Refinement:
    """Latencies of the first correct kernel and of the refining rounds that follow it. Each refining
    round is correct with chance refine_correct and faster (by 2-25%) with chance
    sigmoid(improve_logit + effect * value); a later kernel replaces the best only when its measured
    latency is lower by more than twice the timing noise, as the agent's noise-aware best does."""
    assert found.first_correct is not None
    # Every draw is made up front and indexed by round, whichever round drafting ended in: the first
    # kernel's latency and each round's chances are the same in every policy's episode.
    first = rng.normal(size=2)
    per_round = rng.random((budget, 3))  # faster?, by how much, still correct?
    noise = rng.normal(size=budget)
    true_latency = t_reference * math.exp(config.first_slowdown[level - 1] + 0.3 * first[0])
    t_first = best = measured(true_latency, config, float(first[1]))
    rounds = [*found.rounds[:-1], replace(found.rounds[-1], latency=t_first)]
    p_faster = _sigmoid(config.improve_logit + config.effect * effect)
    margin = math.exp(-2 * config.timing_noise)
    for round_no in range(found.first_correct + 1, budget + 1):
        u_faster, u_amount, u_correct = per_round[round_no - 1]
        faster = bool(u_faster < p_faster)
        candidate = true_latency * math.exp(-(0.02 + 0.23 * u_amount) if faster else 0.2 * u_amount)
        correct = bool(u_correct < config.refine_correct)
        latency = measured(candidate, config, float(noise[round_no - 1])) if correct else None
        if latency is not None and latency < best * margin:
            best, true_latency = latency, candidate
        rounds.append(RoundOutcome(round=round_no, stage="refine", compiled=True, correct=correct, latency=latency))
    return Refinement(rounds=rounds, t_first=t_first, t_best=best, made_faster=best < t_first)


def new_lessons(transitions: list[str], used: dict[str, list[tuple[int, float]]], positive: dict[str, np.ndarray],
                stage_lessons: dict[str, np.ndarray], weights: dict[str, np.ndarray], config: StandInConfig,
                rngs: list[np.random.Generator]) -> list[int]:
    """One new lesson per transition (stage draft for a fixed compile error or wrong result, refine for a
    faster kernel), as the curator extracts one per transition. With chance reuse_rate it restates a used
    item of that stage with positive value (chosen by value); otherwise it is discovered: a random lesson of
    the stage with chance spurious_rate, else one that helps this operator (chosen by value).

    `used[stage]` lists (lesson, value) of the items used in that stage; `positive[stage]` the lessons of
    that stage with positive value for the operator and `weights[stage]` their values; `stage_lessons` all
    lessons of each stage. `rngs[i]` is the stream of the i-th transition's draws."""
    found: list[int] = []
    for transition, rng in zip(transitions, rngs, strict=True):
        stage = "refine" if transition == "made it faster" else "draft"
        helpful = [(lesson, value) for lesson, value in used.get(stage, []) if value > 0]
        if helpful and rng.random() < config.reuse_rate:
            values = np.array([v for _, v in helpful])
            found.append(helpful[int(rng.choice(len(helpful), p=values / values.sum()))][0])
        elif len(positive[stage]) and rng.random() >= config.spurious_rate:
            found.append(int(rng.choice(positive[stage], p=weights[stage] / weights[stage].sum())))
        elif len(stage_lessons[stage]):
            found.append(int(rng.choice(stage_lessons[stage])))
    return found
