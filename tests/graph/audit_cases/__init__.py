"""The labelled set of declared adoptions (cpu.yaml, ascend.yaml, triton.yaml: one file per backend), read as
data by tests/graph/test_adoption_audit.py and bench/audit_bench.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    """One declared adoption: the item, the previous and the new candidate, and whether the new one follows it."""

    id: str
    backend: str
    label: bool
    item: str
    previous: str
    current: str
    why: str
    example: str | None = None
    xfail: str | None = None  # why the audit gets this one wrong (it stays in the set and counts)

    @property
    def file_name(self) -> str:
        return "kernel.py" if self.backend == "triton" else "kernel.cpp"


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(HERE.glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]:
            cases.append(Case(backend=path.stem, **entry))
    return cases
