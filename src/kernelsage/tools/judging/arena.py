"""The memory a judge shares with its runner: tensors in two memfds, placed one after another.

The inputs memfd is sealed against writes once the judge has mapped it (F_SEAL_FUTURE_WRITE): the judge keeps
writing through its own mapping, the runner can only map it read-only, so a kernel cannot change its inputs
(a write faults). Both memfds are sealed against shrinking, so the runner cannot truncate them under the
judge. Nothing here runs candidate code. How a runner learns where its tensors are is its backend's own (the cpu
backend's binary set descriptions, tools/cpu/sets.py; the triton runner's JSON).
"""

from __future__ import annotations

import fcntl
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

ALIGNMENT = 64  # bytes; what torch's allocator gives, enough for any vector load
SLOT_ALIGNMENT = 4096
# Bytes left free before and after every placed tensor. Around inputs they hold NaN (all bits set), so a kernel
# that reads past a tensor's end (a loop bound off by one) computes NaN instead of reading a harmless zero; around
# verify's outputs they hold GUARD_BYTE, checked after every call, so a write past an output's end is seen.
GUARD = ALIGNMENT
INPUT_GUARD_BYTE = 0xFF
GUARD_BYTE = 0xA5
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)


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

    def fill(self, byte: int) -> None:
        """Every byte of the region := `byte` (before anything is placed in it)."""
        if self.size:
            torch.frombuffer(self._map, dtype=torch.uint8, count=self.size).fill_(byte)

    def guards(self, places: Sequence[Placed]) -> list[torch.Tensor]:
        """The GUARD bytes after each place, as byte views (the one before the first place too)."""
        spans = [(p.offset + p.nbytes, GUARD) for p in places]
        if places:
            spans.insert(0, (places[0].offset - GUARD, GUARD))
        return [torch.frombuffer(self._map, dtype=torch.uint8, count=min(size, self.size - start), offset=start)
                for start, size in spans if 0 <= start < self.size]

    def close(self) -> None:
        os.close(self.fd)  # the mapping lives as long as tensors view it


@dataclass(frozen=True)
class Placed:
    """A tensor's place in a region."""

    offset: int
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * self.dtype.itemsize


class Planner:
    """Offsets for tensors placed one after another, each aligned, with GUARD free bytes before and after each."""

    def __init__(self) -> None:
        self.size = GUARD

    def place(self, dtype: torch.dtype, shape: Sequence[int]) -> Placed:
        placed = Placed(align(self.size), dtype, tuple(int(s) for s in shape))
        self.size = placed.offset + placed.nbytes + GUARD
        return placed


class Arena:
    """The inputs and outputs regions of one runner."""

    def __init__(self, input_bytes: int, output_bytes: int) -> None:
        self.inputs = Region("inputs", input_bytes, read_only_for_others=True)
        self.inputs.fill(INPUT_GUARD_BYTE)  # what an input read past its end finds: NaN
        self.outputs = Region("outputs", output_bytes, read_only_for_others=False)

    def close(self) -> None:
        self.inputs.close()
        self.outputs.close()


def sealed_memfd(name: str, data: bytes) -> int:
    """A memfd holding `data`, sealed against any change."""
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                | fcntl.F_SEAL_SEAL)
    return fd
