"""The memory the judge shares with the runner: tensors in two memfds, and the set descriptions the runner reads.

The inputs memfd is sealed against writes once the judge has mapped it (F_SEAL_FUTURE_WRITE): the judge keeps
writing through its own mapping, the runner can only map it read-only, so a kernel cannot change its inputs
(a write faults). Both memfds are sealed against shrinking, so the runner cannot truncate them under the
judge. Nothing here runs candidate code; the layouts follow struct ks_set_header / ks_tensor_desc /
ks_attr_desc in native/ks_runner.c and ks_tensor / ks_attr in kernelsage_cpu.h.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelsage.tools.cpu.abi import ATTR_FLOAT, ATTR_INT, ATTR_INTS, ATTR_STRING, DTYPE_CODES, MAX_DIMS

ALIGNMENT = 64  # bytes; what torch's allocator gives, enough for any vector load
SLOT_ALIGNMENT = 4096
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)
SET_HEADER = struct.Struct("<IIII")
TENSOR_DESC = struct.Struct(f"<Qii{MAX_DIMS}q{MAX_DIMS}q")
ATTR_DESC = struct.Struct("<iIqdQQ")


def align(value: int, to: int = ALIGNMENT) -> int:
    return (value + to - 1) // to * to


class Region:
    """One memfd, mapped read-write in the judge; tensors are views of the mapping."""

    def __init__(self, name: str, size: int, *, read_only_for_others: bool) -> None:
        self.size = max(int(size), 0)
        self.fd = os.memfd_create(f"kernelsage-{name}", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        os.ftruncate(self.fd, max(self.size, 1))
        self._map = mmap.mmap(self.fd, max(self.size, 1))
        seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
        if read_only_for_others:
            seals |= F_SEAL_FUTURE_WRITE  # our mapping stays writable; no new writable mapping, no write()
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, seals | fcntl.F_SEAL_SEAL)

    def tensor(self, offset: int, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
        count = 1
        for size in shape:
            count *= int(size)
        if count == 0:
            return torch.empty(tuple(shape), dtype=dtype)
        return torch.frombuffer(self._map, dtype=dtype, count=count, offset=offset).view(tuple(shape))

    def close(self) -> None:
        os.close(self.fd)  # the mapping lives as long as tensors view it


@dataclass(frozen=True)
class Placed:
    """A tensor's place in a region: what the runner needs to build its ks_tensor."""

    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * self.dtype.itemsize

    def describe(self) -> bytes:
        if self.dtype not in DTYPE_CODES:
            raise TypeError(f"dtype {self.dtype} is not part of the CPU kernel ABI")
        if len(self.shape) > MAX_DIMS:
            raise ValueError(f"{len(self.shape)} dimensions exceed the ABI's {MAX_DIMS}")
        strides, step = [], 1
        for size in reversed(self.shape):
            strides.insert(0, step)
            step *= max(size, 1)
        pad = [0] * (MAX_DIMS - len(self.shape))
        return TENSOR_DESC.pack(self.offset, DTYPE_CODES[self.dtype], len(self.shape), *self.shape, *pad,
                                *strides, *pad)


class Planner:
    """Offsets for tensors placed one after another, each aligned."""

    def __init__(self) -> None:
        self.size = 0

    def place(self, dtype: torch.dtype, shape: Sequence[int]) -> Placed:
        placed = Placed(align(self.size), dtype, tuple(int(s) for s in shape))
        self.size = placed.offset + placed.nbytes
        return placed


def describe_attrs(attrs: Mapping[str, Any]) -> bytes:
    """The attribute records (kind, name, value), with names and strings NUL-terminated."""
    parts = []
    for name, value in attrs.items():
        encoded = name.encode()
        ints: list[int] = []
        text = b""
        kind, i, f = ATTR_INT, 0, 0.0
        if isinstance(value, (bool, int)):
            i = int(value)
        elif isinstance(value, float):
            kind, f = ATTR_FLOAT, value
        elif isinstance(value, str):
            kind, text = ATTR_STRING, value.encode()
        else:
            kind, ints = ATTR_INTS, [int(v) for v in value]
        parts.append(ATTR_DESC.pack(kind, len(encoded), i, f, len(ints), len(text)) + encoded + b"\0"
                     + struct.pack(f"<{len(ints)}q", *ints) + text + b"\0")
    return b"".join(parts)


def describe_set(inputs: Sequence[Placed], outputs: Sequence[Placed], attrs: Mapping[str, Any]) -> bytes:
    """One input set as the runner reads it (output offsets are relative to the slot a call names)."""
    return (SET_HEADER.pack(len(inputs), len(outputs), len(attrs), 0)
            + b"".join(t.describe() for t in (*inputs, *outputs)) + describe_attrs(attrs))


class Arena:
    """The inputs and outputs regions of one runner."""

    def __init__(self, input_bytes: int, output_bytes: int) -> None:
        self.inputs = Region("inputs", input_bytes, read_only_for_others=True)
        self.outputs = Region("outputs", output_bytes, read_only_for_others=False)

    def close(self) -> None:
        self.inputs.close()
        self.outputs.close()
