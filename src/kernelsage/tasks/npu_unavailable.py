"""The error a suite's reference raises on the CPU when it needs the NPU (`loaders.npu_standin` raises it): kept
apart from the loaders, so that describing a case (`interface`) does not import them."""

from __future__ import annotations


class NpuUnavailable(RuntimeError):
    """An NPU-only feature was used by a reference that runs on the CPU."""
