"""Run a reference written for the CPU on another device, unchanged: while `placed_on(device)` is active,
every CPU tensor an operator receives (the case's inputs, a module's parameters) is moved to the device
once and the moved copy reused, and tensors the reference creates are created there.

This is how a task's reference is timed on the NPU (its inputs were made on the CPU by the task's own
generator, so the candidate and the reference see the same values).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map


class MoveToDevice(TorchFunctionMode):
    """Moves CPU tensor arguments to `device` (each tensor once, by identity)."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device
        self._moved: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id -> (original, moved)

    def _move(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
            return value
        known = self._moved.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        with torch._C.DisableTorchFunction():
            moved = value.to(self.device)
        self._moved[id(value)] = (value, moved)
        return moved

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        return func(*tree_map(self._move, args), **tree_map(self._move, kwargs or {}))


@contextmanager
def placed_on(device: torch.device | str) -> Iterator[None]:
    """Operators inside the block run on `device` (see the module's docstring)."""
    device = torch.device(device)
    with torch.device(device), MoveToDevice(device):
        yield
