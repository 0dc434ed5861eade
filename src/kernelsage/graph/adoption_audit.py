"""The adoption audit (METHOD §3): does the code the model wrote show the memory item it declared adopted?

Item texts and source files in, a verdict with the names that decided it out. ATU credits what the model
declares; this checks the declaration against the code, so a run can report how often the two agree and,
with `SageParams.adoption = "audited"`, credit only adoptions the code shows.

The code is read as its compiler or interpreter reads it (`kernelsage.graph.audit`): C and C++ through the
host preprocessor and tree-sitter, Python through `ast`, and only what live code *uses* counts (a name in
a comment, a string, a dead branch, an unused macro, variable or helper shows nothing). The item's *cues*
(`audit.cues`) are the names it gives, its pragmas, its code example's lines and, for a diff, its
direction. A cue counts only when it is *new*: used by the code of a round that declared the item and not by
the previous candidate of the episode (in round 1 nothing came before). What the prompt's contract names is
no reason to refuse: a candidate that newly calls `DataCopyPad` shows it, whoever mentioned it first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from kernelsage.graph.audit.code import EMPTY, Code
from kernelsage.graph.audit.cues import Cues, cue_name, is_name, item_cues
from kernelsage.graph.audit.preprocess import Preprocessor, preprocessor_for

__all__ = [
    "EMPTY", "MAX_MATCHED", "MIN_WORDS", "AdoptionCheck", "Code", "Cues", "Preprocessor", "Round", "audit_episode",
    "evidence", "item_cues", "preprocessor_for",
]

MIN_WORDS = 2  # plain words of a code example needed together
MAX_MATCHED = 8  # matched cues kept in a check's record


class AdoptionCheck(BaseModel):
    """The audit of one item declared adopted in one episode: the record the curator keeps (in the episode's
    memory update and JSONL record) and `kernelsage memory audit` reads."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    item_id: int
    evidenced: bool
    round: int | None = None  # the round whose code showed it (else the first round it was declared in)
    matched: list[str] = Field(default_factory=list)  # the new cues found (at most MAX_MATCHED)
    cues: int = 0  # how many cues the item offers: 0 means it names nothing the code could show
    reason: str = ""


def evidence(cues: Cues, source: Code, previous: Code = EMPTY) -> tuple[bool, list[str], str]:
    """Whether `source` shows the item (cues its live code uses and `previous` did not), the cues that showed
    it, and why in words (with how the code was read, where that was degraded)."""
    verdict = _verdict(cues, source, previous)
    notes = sorted(set(source.notes + previous.notes))
    return verdict if not notes else (verdict[0], verdict[1], f"{verdict[2]} [{'; '.join(notes)}]")


def _verdict(cues: Cues, source: Code, previous: Code) -> tuple[bool, list[str], str]:
    if cues.count == 0:
        return False, [], "the item names nothing code could show (no identifier, pragma or code example)"

    def new(token: str) -> bool:
        name = cue_name(token)
        return source.shows(name) and not previous.shows(name) and not source.renames(name, previous)

    names = sorted(t for t in cues.names if new(t))
    words = sorted(t for t in cues.words if new(t))
    pragmas = sorted(" ".join(p) for p in cues.pragmas if source.has_pragma(p) and not previous.has_pragma(p))
    fragments = sorted(f for f in cues.fragments if source.has_fragment(f) and not previous.has_fragment(f))
    removed = sorted(t for t in cues.removed if previous.shows(cue_name(t)) and not source.shows(cue_name(t)))
    strong = names + [f"#pragma {p}" for p in pragmas] + [f"`{f}`" for f in fragments]
    gone = [f"-{t}" for t in removed]
    evidenced = bool(strong) or bool(gone and any(is_name(t) for t in removed)) or len(words) + len(removed) >= MIN_WORDS
    if evidenced:
        matched = (strong + words + gone)[:MAX_MATCHED]
        return True, matched, "new in the code: " + ", ".join(matched)
    present = sorted([t for t in cues.names | cues.words if source.shows(cue_name(t))] +
                     [f"#pragma {' '.join(p)}" for p in cues.pragmas if source.has_pragma(p)])
    if present:
        return False, [], ("what it names was already there before this code, or renames what was "
                           f"({', '.join(present[:4])})")
    return False, [], f"none of its {cues.count} cues appear in the live code"


@dataclass(frozen=True)
class Round:
    """One round's candidate as the audit sees it: its number, files, and the items declared adopted."""

    round: int
    files: Mapping[str, str]
    adopted: frozenset[int]


def audit_episode(rounds: Sequence[Round], cues: Mapping[int, Cues], *,
                  preprocessor: Preprocessor | None = None) -> list[AdoptionCheck]:
    """Check every item declared adopted in the episode: it is evidenced when the code of any round that
    declared it shows a new cue of it (against the round's previous candidate). Items in id order. C and C++
    are read through `preprocessor` (the host g++ at C++17 by default; `preprocessor_for(backend)`)."""
    ordered = sorted(rounds, key=lambda r: r.round)
    codes = [Code.of(r.files, preprocessor=preprocessor) if r.files else EMPTY for r in ordered]
    checks = []
    for item in sorted({i for r in ordered for i in r.adopted}):
        first: int | None = None
        verdict: tuple[bool, list[str], str] | None = None
        for index, current in enumerate(ordered):
            if item not in current.adopted:
                continue
            first = current.round if first is None else first
            previous = next((codes[j] for j in range(index - 1, -1, -1) if ordered[j].files), EMPTY)
            found = evidence(cues.get(item, Cues()), codes[index], previous)
            if found[0]:
                checks.append(AdoptionCheck(item_id=item, evidenced=True, round=current.round, matched=found[1],
                                            cues=cues.get(item, Cues()).count, reason=found[2]))
                break
            verdict = verdict or found
        else:
            assert verdict is not None
            checks.append(AdoptionCheck(item_id=item, evidenced=False, round=first,
                                        cues=cues.get(item, Cues()).count, reason=verdict[2]))
    return checks
