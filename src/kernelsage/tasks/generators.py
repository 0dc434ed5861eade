"""Random inputs for task cases, drawn from an explicit generator so a seed reproduces them."""

from __future__ import annotations

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
