"""The constants of kernelsage_cpu.h the trusted side needs to describe tensors and attributes to the runner.

The judge never loads a candidate library itself (there is deliberately no ctypes binding here): the
isolated runner (native/ks_runner.c) does, and builds the ks_tensor / ks_attr structs from the judge's
descriptions (`kernelsage.tools.cpu.arena`).
"""

from __future__ import annotations

from pathlib import Path

HEADER = Path(__file__).with_name("kernelsage_cpu.h")
ENTRY_POINT = "ks_kernel"
MAX_DIMS = 8

# Keyed by torch's dtype names, so that this module (which the adoption audit reads) needs no torch.
DTYPE_CODES: dict[str, int] = {
    "float32": 0, "float64": 1, "float16": 2, "bfloat16": 3,
    "int32": 4, "int64": 5, "int8": 6, "uint8": 7, "bool": 8,
}
ATTR_INT, ATTR_FLOAT, ATTR_INTS, ATTR_STRING = 0, 1, 2, 3
