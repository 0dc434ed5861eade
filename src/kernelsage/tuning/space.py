"""The space a kernel declares: named parameters, each with its allowed values (the first is the default), and
the configurations the tuner may build (every combination, or the explicit list a Triton autotune gives)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kernelsage.errors import ConfigurationError

Value = int
Config = tuple[tuple[str, Value], ...]  # (name, value) pairs in declaration order: hashable, printable


class TuningError(ConfigurationError):
    """A kernel's tunables cannot be tuned: none declared, a malformed declaration, or no correct default."""


@dataclass(frozen=True)
class Tunable:
    """One declared parameter: its name and allowed values, the first being the default."""

    name: str
    values: tuple[Value, ...]
    line: int = 0  # where it was declared (1-based; 0 when unknown)

    @property
    def default(self) -> Value:
        return self.values[0]


@dataclass(frozen=True)
class TuningSpace:
    """The parameters and the configurations allowed; `configs[0]` is the default."""

    parameters: tuple[Tunable, ...]
    configs: tuple[Config, ...]

    @property
    def default(self) -> Config:
        return self.configs[0]

    @property
    def size(self) -> int:
        return len(self.configs)


def grid_space(parameters: Sequence[Tunable]) -> TuningSpace:
    """Every combination of the parameters' values, the all-defaults one first."""
    if not parameters:
        raise TuningError("no tunable parameters declared")
    names = [p.name for p in parameters]
    combos = itertools.product(*(p.values for p in parameters))
    return TuningSpace(tuple(parameters), tuple(tuple(zip(names, combo, strict=True)) for combo in combos))


def listed_space(configs: Sequence[Mapping[str, Value]]) -> TuningSpace:
    """An explicit list of configurations (the first is the default), all naming the same parameters."""
    if not configs:
        raise TuningError("no tunable configurations declared")
    names = list(configs[0])
    for index, config in enumerate(configs):
        if list(config) != names:
            raise TuningError(f"configuration {index + 1} sets {sorted(config)}, the first sets {sorted(names)}: "
                              "every configuration must set the same parameters")
    parameters = tuple(Tunable(name, tuple(dict.fromkeys(c[name] for c in configs))) for name in names)
    unique = tuple(dict.fromkeys(tuple((name, c[name]) for name in names) for c in configs))
    return TuningSpace(parameters, unique)


def _one_parameter_away(space: TuningSpace, config: Config) -> list[tuple[int, int, Config]]:
    """(steps, parameter index, configuration) for every allowed configuration that differs from `config` in one
    parameter; steps: how far that parameter's value moved among its values ordered by size."""
    order = {p.name: sorted(p.values) for p in space.parameters}
    current = dict(config)
    names = [n for n, _ in config]
    found = []
    for other in space.configs:
        changed = [(name, value) for name, value in other if value != current[name]]
        if len(changed) == 1:
            name, value = changed[0]
            steps = abs(order[name].index(value) - order[name].index(current[name]))
            found.append((steps, names.index(name), other))
    return found


def neighbours(space: TuningSpace, config: Config) -> list[Config]:
    """The allowed configurations that differ from `config` in one parameter, nearest first: a parameter moved
    to the next larger or smaller of its values (by size) before two steps away, and so on, parameters in turn."""
    return [other for _, _, other in sorted(_one_parameter_away(space, config), key=lambda entry: entry[:2])]


def probes(space: TuningSpace, config: Config) -> list[Config]:
    """The same configurations as `neighbours`, coarse before fine: each parameter's farthest value first, then
    its nearest, then its next farthest, and so on, parameters in turn. The search's first generation: a best
    value several steps from the default (a tile 16 times wider) is seen before the budget is spent next to it."""
    by_parameter: dict[int, list[tuple[int, Config]]] = {}
    for steps, index, other in _one_parameter_away(space, config):
        by_parameter.setdefault(index, []).append((steps, other))
    ranked = []
    for index, found in by_parameter.items():
        near = [other for _, other in sorted(found, key=lambda entry: entry[0])]
        alternating = [near[-1 - n // 2] if n % 2 == 0 else near[n // 2] for n in range(len(near))]
        ranked += [(rank, index, other) for rank, other in enumerate(alternating)]
    return [other for _, _, other in sorted(ranked, key=lambda entry: entry[:2])]


def describe(config: Config) -> str:
    """`BLOCK_M=64 UNROLL=4`: how a configuration is printed."""
    return " ".join(f"{name}={value}" for name, value in config)
