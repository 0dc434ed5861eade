"""Which parts of a file run: the names used in code reachable from the file's entry points.

Both readers (C/C++ and Python) cut a file into *units*: a function, a class, a variable's declaration (with
its initialiser), an assignment to a local name, a file-scope constant. A unit is live when its enclosing unit
is live and either it is a root (an entry point, a statement that always runs once its function does) or a
name it defines is used by a live unit. Names are matched by their last component (`op.Process()` makes every
`Process` live, `AscendC::Muls` any `Muls`): an over-approximation, so a use is never lost, while a helper
nobody calls, a variable nobody reads or a macro nobody invokes contributes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelsage.graph.audit.cues import Name


@dataclass
class Unit:
    """A piece of a file that runs only if it is reached; what it defines and what it uses."""

    defines: frozenset[str] = frozenset()
    root: bool = False
    parent: int | None = None
    uses: set[Name] = field(default_factory=set)
    pragmas: list[tuple[str, ...]] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # where its text is (to cut when it is dead)


def live_units(units: Sequence[Unit]) -> set[int]:
    """The indices of the live units (parents come before their children in `units`)."""
    live: set[int] = set()
    referenced: set[str] = set()
    changed = True
    while changed:
        changed = False
        for index, unit in enumerate(units):
            if index in live or (unit.parent is not None and unit.parent not in live):
                continue
            if unit.root or unit.defines & referenced:
                live.add(index)
                referenced.update(name[-1] for name in unit.uses if name)
                changed = True
    return live


def cut(text: bytes, spans: Sequence[tuple[int, int]]) -> bytes:
    """`text` without the (possibly nested or overlapping) byte ranges `spans`."""
    kept: list[bytes] = []
    position = 0
    for start, end in sorted(spans):
        if start > position:
            kept.append(text[position:start])
        position = max(position, end)
    kept.append(text[position:])
    return b"\n".join(kept)


@dataclass(frozen=True)
class Reading:
    """What a reader made of one source: the names its live code uses, the pragmas that apply there, its
    live text (for code-example lines), the names it declares and, when it read the source in a degraded way,
    why."""

    uses: frozenset[Name] = frozenset()
    pragmas: tuple[tuple[str, ...], ...] = ()
    live_text: str = ""
    declared: frozenset[str] = frozenset()
    note: str = ""
