"""Random inputs for task cases, drawn from an explicit generator so a seed reproduces them."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


def torch_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def randn(shape: Sequence[int], dtype: str, generator: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    """Normal values (drawn in float32 so every dtype sees the same distribution)."""
    return (torch.randn(tuple(shape), generator=generator) * scale).to(torch_dtype(dtype))


def uniform(shape: Sequence[int], dtype: str, generator: torch.Generator, low: float, high: float) -> torch.Tensor:
    values = torch.rand(tuple(shape), generator=generator) * (high - low) + low
    return values.to(torch_dtype(dtype))


def randint(shape: Sequence[int], low: int, high: int, generator: torch.Generator,
            dtype: str = "int64") -> torch.Tensor:
    return torch.randint(low, high, tuple(shape), generator=generator).to(torch_dtype(dtype))


# Inputs that make every parameter of a task matter (issue 30, point 5) ---------------------------------------

def row_scales(rows: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    """One scale per row (float64), log-spaced from `low` to `high` and shuffled: whatever eps a norm uses in
    that range, some row's mean square sits near it, some far below, some far above."""
    if rows == 1:
        return torch.tensor([high], dtype=torch.float64)
    scales = torch.logspace(math.log10(low), math.log10(high), rows, dtype=torch.float64)
    return scales[torch.randperm(rows, generator=generator)]


def spread_rows(rows: int, n: int, dtype: str, generator: torch.Generator, low: float, high: float,
                offset: float = 0.0, zero_row: bool = False) -> torch.Tensor:
    """Rows of normal values, row r scaled by row_scales' r-th scale, around a constant drawn per row from
    [-offset, offset] (a near-constant row: tiny variance, large mean); `zero_row` makes one row all zeros,
    where only eps keeps a norm finite."""
    noise = torch.randn((rows, n), generator=generator, dtype=torch.float64) * row_scales(rows, low, high,
                                                                                           generator)[:, None]
    centre = (torch.rand((rows, 1), generator=generator, dtype=torch.float64) * 2 - 1) * offset
    values = noise + centre
    if zero_row:
        values[torch.randperm(rows, generator=generator)[:1]] = 0.0  # no int(): this also runs on the meta device
    return values.to(torch_dtype(dtype))


def tied(shape: Sequence[int], dtype: str, generator: torch.Generator, levels: int = 8,
         step: float = 0.25) -> torch.Tensor:
    """Values on a coarse grid (2 * levels + 1 of them, `step` apart, zero included): many exact ties, the
    largest value of a row among them."""
    return (torch.randint(-levels, levels + 1, tuple(shape), generator=generator).to(torch.float64) * step) \
        .to(torch_dtype(dtype))


def sprinkle(tensor: torch.Tensor, generator: torch.Generator, fraction: float,
             values: Sequence[float]) -> torch.Tensor:
    """`tensor` with about `fraction` of its elements, at random places, set to one of `values` (e.g. NaN,
    +-inf, 0) drawn at random."""
    chosen = torch.rand(tensor.shape, generator=generator) < fraction
    pool = torch.tensor(list(values), dtype=torch.float64)
    picks = pool[torch.randint(len(pool), tensor.shape, generator=generator)].to(tensor.dtype)
    return torch.where(chosen, picks, tensor)


def close_pairs(shape: Sequence[int], dtype: str, generator: torch.Generator, low: float, high: float,
                relative: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs (a, b) of magnitudes log-uniform in [low, high], random signs, b = a * (1 + relative * noise):
    |a - b| is tiny next to a and b, so rounding a or b to a shorter float (a half) changes it by far more
    than its own size."""
    exponents = torch.rand(tuple(shape), generator=generator, dtype=torch.float64) \
        * (math.log10(high) - math.log10(low)) + math.log10(low)
    signs = torch.where(torch.rand(tuple(shape), generator=generator) < 0.5, -1.0, 1.0).to(torch.float64)
    a = signs * torch.pow(10.0, exponents)
    b = a * (1.0 + relative * torch.randn(tuple(shape), generator=generator, dtype=torch.float64))
    return a.to(torch_dtype(dtype)), b.to(torch_dtype(dtype))
