"""Tiling found by profiling in the loop: tunables declared in each backend's own way, searched within a budget
of compiles plus profiles, every configuration verified before it is timed (docs/tuning.md). Public names load
on first use, so the light modules (params, space, the declaration readers) load no backend."""

from kernelsage.lazy_exports import lazy_exports

__all__ = ["DEFAULT_BUDGET", "TriedConfig", "TuningError", "TuningParams", "TuningResult", "TuningSpace", "tune"]
_WHERE = {"DEFAULT_BUDGET": "params", "TuningParams": "params", "TriedConfig": "result", "TuningResult": "result",
          "TuningError": "space", "TuningSpace": "space", "tune": "tuner"}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
