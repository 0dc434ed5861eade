"""How the cpu judge describes an input set to ks_runner: tensors and attributes as the binary records of struct
ks_set_header / ks_tensor_desc / ks_attr_desc in native/ks_runner.c (ks_tensor / ks_attr in kernelsage_cpu.h)."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from kernelsage.tools.cpu.abi import ATTR_FLOAT, ATTR_INT, ATTR_INTS, ATTR_STRING, DTYPE_CODES, MAX_DIMS
from kernelsage.tools.judging.arena import Placed

_CODE_OF_DTYPE = {getattr(torch, name): code for name, code in DTYPE_CODES.items()}

SET_HEADER = struct.Struct("<IIII")
TENSOR_DESC = struct.Struct(f"<Qii{MAX_DIMS}q{MAX_DIMS}q")
ATTR_DESC = struct.Struct("<iIqdQQ")


def describe_tensor(placed: Placed) -> bytes:
    """One tensor's record: offset, dtype code, shape and contiguous strides."""
    if placed.dtype not in _CODE_OF_DTYPE:
        raise TypeError(f"dtype {placed.dtype} is not part of the CPU kernel ABI")
    if len(placed.shape) > MAX_DIMS:
        raise ValueError(f"{len(placed.shape)} dimensions exceed the ABI's {MAX_DIMS}")
    strides, step = [], 1
    for size in reversed(placed.shape):
        strides.insert(0, step)
        step *= max(size, 1)
    pad = [0] * (MAX_DIMS - len(placed.shape))
    return TENSOR_DESC.pack(placed.offset, _CODE_OF_DTYPE[placed.dtype], len(placed.shape), *placed.shape, *pad,
                            *strides, *pad)


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
            + b"".join(describe_tensor(t) for t in (*inputs, *outputs)) + describe_attrs(attrs))
