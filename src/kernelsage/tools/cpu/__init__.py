"""The cpu backend: C++17 + OpenMP kernels against the C ABI in kernelsage_cpu.h."""

from __future__ import annotations

from kernelsage.tools.cpu.abi import HEADER

__all__ = ["HEADER"]
