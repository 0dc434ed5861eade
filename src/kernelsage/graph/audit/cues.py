"""What an item names that code could show (its *cues*), and how a name is compared with code's names.

A cue is a name the item gives (an identifier with an underscore, a digit, an inner capital or a `::`/`.`
qualifier in its text, any identifier in `backticks` or in its code example), a pragma's words, a line of its
code example, or, for an example that is a diff, what only its `-` lines hold. Names are kept as tuples of
components (`AscendC::WholeReduceSum` is `("AscendC", "WholeReduceSum")`); `tl.` is read as Triton's
`triton.language.`, the alias every Triton kernel imports it under.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

Name = tuple[str, ...]

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:::|\.)[A-Za-z_][A-Za-z0-9_]*)*")
BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
PRAGMA = re.compile(r"#[ \t]*pragma[ \t]+([A-Za-z_][A-Za-z0-9_ \t]*)")
MIN_FRAGMENT = 16  # characters of a code-example line (white space collapsed) that count as a fragment
MAX_PRAGMA_WORDS = 4  # an item's pragma is matched by its first words, in order
CUE_ALIASES = {"tl": ("triton", "language")}  # how items spell a module, and the module they mean
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


@dataclass(frozen=True)
class Cues:
    """What an item names that code could show, by kind (names as written in the item)."""

    names: frozenset[str] = frozenset()
    words: frozenset[str] = frozenset()
    pragmas: frozenset[tuple[str, ...]] = frozenset()
    fragments: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()  # names and words only a diff's `-` lines hold

    @property
    def count(self) -> int:
        return len(self.names) + len(self.words) + len(self.pragmas) + len(self.fragments) + len(self.removed)


def cue_name(text: str) -> Name:
    """A cue's components, with the module aliases items use spelled out (`tl.dot` -> triton.language.dot)."""
    parts = tuple(p for p in re.split(r"::|\.", text) if p)
    return CUE_ALIASES.get(parts[0], parts[:1]) + parts[1:] if parts else parts


def normal(text: str) -> str:
    """`text` as fragments are compared: white space collapsed, and none beside punctuation."""
    return re.sub(r" ?([^\w\s]) ?", r"\1", " ".join(text.split()))


def pragma_words(text: str) -> tuple[str, ...]:
    """The words of a pragma's text (`omp parallel for schedule(static)` -> omp parallel for schedule static)."""
    return tuple(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


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


def _example_tokens(code: str) -> set[str]:
    """The identifiers of a code example, comments and literals aside (an example is read, not compiled)."""
    code = re.sub(r'/\*[\s\S]*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|(?<!\w)\'(?:\\.|[^\'\\\n])*\'', " ", code)
    tokens = set(IDENT.findall(PRAGMA.sub(" ", code)))
    return tokens | {part for token in tokens for part in re.split(r"::|\.", token)}


def item_cues(texts: Iterable[str], code_example: str | None = None) -> Cues:
    """The cues of an item: names in its texts (rule, source text), everything checkable in its code."""
    names: set[str] = set()
    words: set[str] = set()
    pragmas: set[tuple[str, ...]] = set()
    for text in texts:
        pragmas.update(pragma_words(m.group(1))[:MAX_PRAGMA_WORDS] for m in PRAGMA.finditer(text))
        names.update(t for t in IDENT.findall(PRAGMA.sub(" ", text)) if is_name(t))
        for span in BACKTICKED.findall(text):
            names.update(t for t in IDENT.findall(PRAGMA.sub(" ", span)) if len(t) >= 3 and t.lower() not in STOPWORDS)
    fragments: set[str] = set()
    removed: set[str] = set()
    if code_example:
        sides = _diff_sides(code_example)
        added, gone = sides if sides else (code_example, "")
        pragmas.update(pragma_words(m.group(1))[:MAX_PRAGMA_WORDS] for m in PRAGMA.finditer(added))
        tokens = _example_tokens(added)
        names.update(t for t in tokens if is_name(t))
        words.update(t for t in tokens if _word(t) and not is_name(t))
        lines = (" ".join(line.split()) for line in re.sub(r"//[^\n]*", "", added).splitlines())
        fragments.update(f for f in lines if len(f) >= MIN_FRAGMENT and not f.startswith("#"))
        if gone:
            removed.update(t for t in _example_tokens(gone) - tokens if is_name(t) or _word(t))
    pragmas.discard(())
    return Cues(names=frozenset(names), words=frozenset(words - names), pragmas=frozenset(pragmas),
                fragments=frozenset(fragments), removed=frozenset(removed))
