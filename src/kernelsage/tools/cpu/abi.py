"""The constants of kernelsage_cpu.h the trusted side needs to describe tensors and attributes to the runner.

The judge never loads a candidate library itself (there is deliberately no ctypes binding here): the
isolated runner (native/ks_runner.c) does, and builds the ks_tensor / ks_attr structs from the judge's
descriptions (`kernelsage.tools.cpu.arena`).
"""

from __future__ import annotations

from pathlib import Path

import torch

HEADER = Path(__file__).with_name("kernelsage_cpu.h")
ENTRY_POINT = "ks_kernel"
MAX_DIMS = 8

DTYPE_CODES: dict[torch.dtype, int] = {
    torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
    torch.int32: 4, torch.int64: 5, torch.int8: 6, torch.uint8: 7, torch.bool: 8,
}
ATTR_INT, ATTR_FLOAT, ATTR_INTS, ATTR_STRING = 0, 1, 2, 3
