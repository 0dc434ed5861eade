"""The ctypes mirror of kernelsage_cpu.h: marshal torch CPU tensors and attributes into the kernel's ABI."""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

HEADER = Path(__file__).with_name("kernelsage_cpu.h")
ENTRY_POINT = "ks_kernel"
MAX_DIMS = 8

DTYPE_CODES: dict[torch.dtype, int] = {
    torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
    torch.int32: 4, torch.int64: 5, torch.int8: 6, torch.uint8: 7, torch.bool: 8,
}
ATTR_INT, ATTR_FLOAT, ATTR_INTS, ATTR_STRING = 0, 1, 2, 3


class KsTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS), ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


class KsAttr(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("i", ctypes.c_int64), ("f", ctypes.c_double),
        ("ints", ctypes.POINTER(ctypes.c_int64)), ("n_ints", ctypes.c_int64), ("s", ctypes.c_char_p),
    ]


def tensor_struct(tensor: torch.Tensor) -> KsTensor:
    """A KsTensor viewing `tensor`'s storage (the tensor must stay alive while the struct is used)."""
    if tensor.dtype not in DTYPE_CODES:
        raise TypeError(f"dtype {tensor.dtype} is not part of the CPU kernel ABI")
    if tensor.dim() > MAX_DIMS:
        raise ValueError(f"{tensor.dim()} dimensions exceed the ABI's {MAX_DIMS}")
    struct = KsTensor()
    struct.data = tensor.data_ptr()
    struct.dtype = DTYPE_CODES[tensor.dtype]
    struct.ndim = tensor.dim()
    for axis, (size, stride) in enumerate(zip(tensor.shape, tensor.stride(), strict=True)):
        struct.shape[axis] = size
        struct.strides[axis] = stride
    return struct


def attr_structs(attrs: Mapping[str, Any]) -> tuple[ctypes.Array, list[Any]]:
    """The attribute array, plus the Python objects that must outlive it (names, int arrays)."""
    array = (KsAttr * max(len(attrs), 1))()
    keep: list[Any] = []
    for slot, (name, value) in enumerate(attrs.items()):
        entry = array[slot]
        encoded = name.encode()
        keep.append(encoded)
        entry.name = encoded
        if isinstance(value, (bool, int)):
            entry.kind, entry.i = ATTR_INT, int(value)
        elif isinstance(value, float):
            entry.kind, entry.f = ATTR_FLOAT, value
        elif isinstance(value, str):
            text = value.encode()
            keep.append(text)
            entry.kind, entry.s = ATTR_STRING, text
        else:
            values = (ctypes.c_int64 * max(len(value), 1))(*value)
            keep.append(values)
            entry.kind, entry.ints, entry.n_ints = ATTR_INTS, values, len(value)
    return array, keep


class KernelCall:
    """One prepared call of ks_kernel on fixed tensors: building it once keeps the timed call cheap."""

    def __init__(self, function: Any, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
                 attrs: Mapping[str, Any]) -> None:
        self._function = function
        self._tensors = [*inputs, *outputs]  # keep the storage alive
        self._inputs = (KsTensor * max(len(inputs), 1))(*[tensor_struct(t) for t in inputs])
        self._outputs = (KsTensor * max(len(outputs), 1))(*[tensor_struct(t) for t in outputs])
        self._attrs, self._keep = attr_structs(attrs)
        self._counts = (len(inputs), len(outputs), len(attrs))

    def __call__(self) -> int:
        n_inputs, n_outputs, n_attrs = self._counts
        return self._function(self._inputs, n_inputs, self._outputs, n_outputs, self._attrs, n_attrs)


def load_entry_point(library_path: str) -> Any:
    """ks_kernel from a built library. Only ever called inside the sandboxed child: loading runs its code."""
    library = ctypes.CDLL(library_path, mode=ctypes.RTLD_LOCAL)
    function = getattr(library, ENTRY_POINT)
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.POINTER(KsTensor), ctypes.c_int, ctypes.POINTER(KsTensor), ctypes.c_int,
                         ctypes.POINTER(KsAttr), ctypes.c_int]
    return function
