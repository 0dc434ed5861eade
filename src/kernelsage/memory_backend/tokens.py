"""Token counting for the hot-memory budget.

The budget B must never be exceeded in the model's real tokens, so the offline default
over-estimates rather than under-estimates. It takes the larger of two estimates:
UTF-8 bytes / 3 (code and English run at roughly 3-4.5 bytes per BPE token) and the number of
word and punctuation pieces (BPE tokenizers rarely merge across them). The measured error
against a real subword tokenizer is in docs/memory.md; pass your model's own tokenizer
as a `TokenCounter` when you have it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

TokenCounter = Callable[[str], int]

_PIECES = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d|[^\sA-Za-z\d]")


def approx_token_count(text: str) -> int:
    """A conservative offline token estimate (at least 1 for any text)."""
    by_bytes = math.ceil(len(text.encode("utf-8")) / 3)
    by_pieces = len(_PIECES.findall(text))
    return max(1, by_bytes, by_pieces)
