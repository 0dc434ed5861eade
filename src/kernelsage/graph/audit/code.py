"""A candidate's code as the audit compares it: the names its live code uses, its applied pragmas, its live
text, and notes on anything read in a degraded way."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from kernelsage.graph.audit.cpp import read_cpp
from kernelsage.graph.audit.cues import Name, normal
from kernelsage.graph.audit.preprocess import Preprocessor
from kernelsage.graph.audit.python import read_python

HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh")


@dataclass(frozen=True)
class Code:
    """Source files reduced to what the audit compares."""

    uses: frozenset[Name] = frozenset()
    pragmas: tuple[tuple[str, ...], ...] = ()
    flat: str = ""  # the live text, `cues.normal`-ised
    declared: frozenset[str] = frozenset()  # the names the files declare (variables, parameters, functions)
    notes: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, files: Mapping[str, str] | str, *, preprocessor: Preprocessor | None = None) -> Code:
        """The code of `files` (by name: `.py` files are Python, the others C/C++, read as one translation
        unit with the headers first); a bare string is one C++ file."""
        sources = {"kernel.cpp": files} if isinstance(files, str) else dict(files)
        # The model's text may hold lone surrogates (a JSON "\ud800"): no reader nor the preprocessor can encode
        # them, so they become U+FFFD here, once, for every reader.
        sources = {name: text.encode("utf-8", "replace").decode("utf-8") for name, text in sources.items()}
        readings = [read_python(text) for name, text in sorted(sources.items()) if name.endswith(".py")]
        native = [text for name, text in sorted(sources.items(), key=lambda item: (not item[0].endswith(
            HEADER_SUFFIXES), item[0])) if not name.endswith(".py")]
        if native:
            readings.append(read_cpp("\n".join(native), preprocessor or Preprocessor()))
        return cls(uses=frozenset().union(*(r.uses for r in readings)),
                   pragmas=tuple(p for r in readings for p in r.pragmas),
                   flat="\n".join(r.live_text for r in readings),
                   declared=frozenset().union(*(r.declared for r in readings)),
                   notes=tuple(r.note for r in readings if r.note))

    @cached_property
    def _by_last(self) -> dict[str, list[Name]]:
        index: dict[str, list[Name]] = {}
        for name in self.uses:
            if name:
                index.setdefault(name[-1], []).append(name)
        return index

    def shows(self, cue: Name) -> bool:
        """Whether live code uses `cue`: a use whose last components are the cue's (`dot` and `tl.dot` are
        shown by `triton.language.dot`, `AscendC::Muls` by `Muls` after `using namespace AscendC`)."""
        return bool(cue) and any(name[-len(cue):] == cue for name in self._by_last.get(cue[-1], ()))

    def renames(self, name: Name, previous: Code) -> bool:
        """Whether `name`, declared here, is new only as another name for one `previous` declared: the live
        text with it spelt as that old name is `previous`'s (renaming a parameter `BK` to an item's `BLOCK_K`
        follows nothing; swapping a library function for the one an item names is not a rename)."""
        if len(name) != 1 or name[0] not in self.declared or not previous.flat:
            return False
        spelt = re.compile(rf"(?<!\w){re.escape(name[0])}(?!\w)")
        return any(spelt.sub(old, self.flat) == previous.flat for old in previous.declared - self.declared)

    def has_pragma(self, words: tuple[str, ...]) -> bool:
        """Whether an applied pragma holds `words`, in order."""
        return any(_in_order(words, pragma) for pragma in self.pragmas)

    def has_fragment(self, fragment: str) -> bool:
        """Whether the live text holds `fragment` (white space aside), not as part of a longer name."""
        wanted = normal(fragment)
        if not wanted:
            return False
        before = r"(?<!\w)" if re.match(r"\w", wanted[0]) else ""
        after = r"(?!\w)" if re.match(r"\w", wanted[-1]) else ""
        return re.search(before + re.escape(wanted) + after, self.flat) is not None


def _in_order(words: tuple[str, ...], pragma: tuple[str, ...]) -> bool:
    rest = iter(pragma)
    return all(word in rest for word in words)


EMPTY = Code()
