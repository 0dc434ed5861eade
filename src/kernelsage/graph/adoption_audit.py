"""The adoption audit (METHOD §3): does the code the model wrote show the memory item it declared adopted?

Pure: item texts and source files in, a verdict with the names that decided it out. ATU credits what the
model declares; this checks the declaration against the code, so a run can report how often the two agree
and, with `SageParams.adoption = "audited"`, credit only adoptions the code shows.

What counts as evidence (a *cue* of the item, new in the code of a round in which the item was adopted):
- a name the item gives: an identifier with an underscore, a digit, an inner capital or a `::`/`.` qualifier
  (`DataCopyPad`, `_mm256_fmadd_ps`, `__restrict__`, `tl.dot`) in its text, or any identifier in `backticks`
  or in its code example;
- a pragma (`#pragma omp simd`): its words, in order, in one of the code's pragmas;
- a code-example line (16 characters or more once white space is collapsed) found whole in the code;
- for a code example that is a diff, the direction of it: what its `+` lines add appears, what only its
  `-` lines hold disappears from the previous candidate.
A cue counts only when it is *new*: absent from the previous candidate of the episode and from the baseline
(the task's interface, description and the backend's contract, which every prompt shows). Common words
(keywords, types, `for`, `float`, `data`) are never cues, and a plain word of a code example (`tile`,
`acc`) counts only with a second one. Comments and string literals are removed from the code first, so
naming an item in a comment shows nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_][A-Za-z0-9_]*)*")
BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
PRAGMA = re.compile(r"#\s*pragma\s+([A-Za-z_][A-Za-z0-9_ ]*)")
MIN_FRAGMENT = 16  # characters of a code-example line (white space collapsed) that count as a fragment
MIN_WORDS = 2  # plain words of a code example needed together
MAX_MATCHED = 8  # matched cues kept in a check's record
_COMMON = """
alignas alignof and asm auto bool break case catch char class const constexpr const_cast continue decltype
default define delete do double dynamic_cast else endif enum explicit extern false float for friend goto if
ifdef ifndef include inline int long mutable namespace new noexcept not nullptr operator or private protected
public register reinterpret_cast restrict return short signed sizeof static static_cast struct switch
template this throw true try typedef typename union unsigned using virtual void volatile while pragma omp
size_t ssize_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t float16 float32 float64
bfloat16 half std main data size len min max abs sqrt exp out in def import from lambda none pass range self
with yield assert del elif except finally global nonlocal raise print tensor tensors input inputs output
outputs value values result index idx tmp temp count num ptr src dst buf the use add sub mul div sum
"""  # keywords and types of C, C++ and Python, and words every kernel uses: never cues
STOPWORDS = frozenset(_COMMON.split())


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


@dataclass(frozen=True)
class Cues:
    """What an item names that code could show, by kind."""

    names: frozenset[str] = frozenset()
    words: frozenset[str] = frozenset()
    pragmas: frozenset[tuple[str, ...]] = frozenset()
    fragments: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()  # names and words only a diff's `-` lines hold

    @property
    def count(self) -> int:
        return len(self.names) + len(self.words) + len(self.pragmas) + len(self.fragments) + len(self.removed)


@dataclass(frozen=True)
class Code:
    """Source text reduced to what the audit compares: identifiers, pragmas, collapsed text."""

    identifiers: frozenset[str]
    pragmas: tuple[tuple[str, ...], ...]
    flat: str

    @classmethod
    def of(cls, files: Mapping[str, str] | str, *, comments: bool = False) -> Code:
        """The code of `files` (by name: `.py` files have Python comments); `comments=True` keeps comments and
        literals (for a baseline, where every word shown counts)."""
        sources = {"code": files} if isinstance(files, str) else dict(files)
        cleaned = "\n".join(text if comments else strip_comments(text, python=name.endswith(".py"))
                             for name, text in sources.items())
        pragmas = tuple(tuple(m.group(1).split()) for m in PRAGMA.finditer(cleaned))
        body = "\n".join(line for line in cleaned.splitlines() if not PRAGMA.match(line.strip()))
        return cls(identifiers=frozenset(_identifiers(body)), pragmas=pragmas, flat=" ".join(cleaned.split()))

    def has_pragma(self, words: tuple[str, ...]) -> bool:
        return any(_in_order(words, pragma) for pragma in self.pragmas)


EMPTY = Code(identifiers=frozenset(), pragmas=(), flat="")


def strip_comments(source: str, *, python: bool = False) -> str:
    """`source` without comments and string or character literals (each literal kept as empty quotes)."""
    if python:
        pattern = r'("""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*)'
    else:
        pattern = r'(/\*[\s\S]*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')'

    def blank(match: re.Match[str]) -> str:
        text = match.group(0)
        return '""' if text[0] in "\"'" else ("\n" * text.count("\n") or " ")

    return re.sub(pattern, blank, source)


def _identifiers(text: str) -> set[str]:
    found: set[str] = set()
    for name in IDENT.findall(text):
        found.add(name)
        found.update(re.split(r"::|\.", name))
    return found


def _in_order(words: tuple[str, ...], pragma: tuple[str, ...]) -> bool:
    rest = iter(pragma)
    return all(word in rest for word in words)


def is_name(token: str) -> bool:
    """Name-shaped: an underscore, a digit, an inner capital or a qualifier, and not a common word."""
    if len(token) < 3 or token.lower() in STOPWORDS:
        return False
    if "::" in token or "." in token:
        return len(re.split(r"::|\.", token)[-1]) >= 3
    return "_" in token or any(c.isdigit() for c in token) or any(c.isupper() for c in token[1:])


def _word(token: str) -> bool:
    return len(token) >= 4 and token.lower() not in STOPWORDS and "." not in token and "::" not in token


def _diff_sides(code: str) -> tuple[str, str] | None:
    """(added, removed) lines of a unified diff, or None when `code` is not one."""
    lines = code.splitlines()
    if not any(line.startswith("@@") or line.startswith("+++") for line in lines):
        return None
    added = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
    removed = [line[1:] for line in lines if line.startswith("-") and not line.startswith("---")]
    return "\n".join(added), "\n".join(removed)


def item_cues(texts: Iterable[str], code_example: str | None = None) -> Cues:
    """The cues of an item: names in its texts (rule, source text), everything checkable in its code."""
    names: set[str] = set()
    words: set[str] = set()
    pragmas: set[tuple[str, ...]] = set()
    for text in texts:
        pragmas.update(tuple(m.group(1).split()[:4]) for m in PRAGMA.finditer(text))
        names.update(t for t in IDENT.findall(PRAGMA.sub(" ", text)) if is_name(t))
        for span in BACKTICKED.findall(text):
            pragmas.update(tuple(m.group(1).split()[:4]) for m in PRAGMA.finditer(span))
            names.update(t for t in IDENT.findall(PRAGMA.sub(" ", span))
                         if len(t) >= 3 and t.lower() not in STOPWORDS)
    fragments: set[str] = set()
    removed: set[str] = set()
    if code_example:
        sides = _diff_sides(code_example)
        added, gone = sides if sides else (code_example, "")
        code = Code.of({"example.cpp": added})
        pragmas.update(p[:4] for p in code.pragmas)
        names.update(t for t in code.identifiers if is_name(t))
        words.update(t for t in code.identifiers if _word(t) and not is_name(t))
        fragments.update(f for f in (" ".join(line.split()) for line in strip_comments(added).splitlines())
                         if len(f) >= MIN_FRAGMENT and not f.startswith("#"))
        if gone:
            before = Code.of({"example.cpp": gone})
            removed.update(t for t in before.identifiers - code.identifiers if is_name(t) or _word(t))
    pragmas.discard(())
    return Cues(names=frozenset(names), words=frozenset(words - names), pragmas=frozenset(pragmas),
                fragments=frozenset(fragments), removed=frozenset(removed))


def evidence(cues: Cues, source: Code, previous: Code = EMPTY, baseline: Code = EMPTY) -> tuple[bool, list[str], str]:
    """Whether `source` shows the item (cues new since `previous` and absent from `baseline`), the cues
    that showed it, and why in words."""
    if cues.count == 0:
        return False, [], "the item names nothing code could show (no identifier, pragma or code example)"
    old = previous.identifiers | baseline.identifiers

    def new(token: str) -> bool:
        return token in source.identifiers and token not in old

    names = sorted(t for t in cues.names if new(t))
    words = sorted(t for t in cues.words if new(t))
    pragmas = sorted(" ".join(p) for p in cues.pragmas
                     if source.has_pragma(p) and not previous.has_pragma(p) and not baseline.has_pragma(p))
    fragments = sorted(f for f in cues.fragments if f in source.flat and f not in previous.flat)
    removed = sorted(t for t in cues.removed if t in previous.identifiers and t not in source.identifiers)
    strong = names + [f"#pragma {p}" for p in pragmas] + [f"`{f}`" for f in fragments]
    gone = [f"-{t}" for t in removed]
    evidenced = bool(strong) or bool(gone and any(is_name(t) for t in removed)) or len(words) + len(removed) >= MIN_WORDS
    if evidenced:
        matched = (strong + words + gone)[:MAX_MATCHED]
        return True, matched, "new in the code: " + ", ".join(matched)
    present = sorted(t for t in cues.names | cues.words if t in source.identifiers)
    if present:
        return False, [], f"what it names was already there before this code ({', '.join(present[:4])})"
    return False, [], f"none of its {cues.count} cues appear in the code"


@dataclass(frozen=True)
class Round:
    """One round's candidate as the audit sees it: its number, files, and the items declared adopted."""

    round: int
    files: Mapping[str, str]
    adopted: frozenset[int]


def audit_episode(rounds: Sequence[Round], cues: Mapping[int, Cues], *, baseline: Code = EMPTY) -> list[AdoptionCheck]:
    """Check every item declared adopted in the episode: it is evidenced when the code of any round that
    declared it shows a new cue of it (against the round's previous candidate). Items in id order."""
    ordered = sorted(rounds, key=lambda r: r.round)
    codes = [Code.of(r.files) if r.files else EMPTY for r in ordered]
    checks = []
    for item in sorted({i for r in ordered for i in r.adopted}):
        first: int | None = None
        verdict: tuple[bool, list[str], str] | None = None
        for index, current in enumerate(ordered):
            if item not in current.adopted:
                continue
            first = current.round if first is None else first
            previous = next((codes[j] for j in range(index - 1, -1, -1) if ordered[j].files), EMPTY)
            found = evidence(cues.get(item, Cues()), codes[index], previous, baseline)
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
