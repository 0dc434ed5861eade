"""How much model-written and backend-written text may re-enter prompts and the state.

The rule (characters, since no tokenizer is at hand; about 3 characters a token for code and English):
- a diagnosis is kept to MAX_DIAGNOSIS_CHARS (its prompt asks for at most 8 sentences), when it is written
  and again whenever it is rendered, so a longer one in an old checkpoint cannot grow a prompt;
- a lesson (one line) to MAX_LESSON_CHARS, a rule to MAX_RULE_CHARS, a lesson's code diff to MAX_DIFF_CHARS;
- the retrieval query to MAX_QUERY_CHARS; one attempt's summary line to MAX_SUMMARY_CHARS;
- a diagnosis tool's output to MAX_TOOL_OUTPUT_CHARS; a file of code shown in a prompt to MAX_CODE_CHARS;
- a malformed answer repeated in a re-ask to MAX_ECHO_CHARS (its head and tail; the middle is elided).
Text over a limit is cut at a word boundary and marked with the number of characters left out.
"""

from __future__ import annotations

MAX_DIAGNOSIS_CHARS = 1_500
MAX_LESSON_CHARS = 400
MAX_RULE_CHARS = 800
MAX_DIFF_CHARS = 3_000
MAX_QUERY_CHARS = 2_000
MAX_SUMMARY_CHARS = 400
MAX_TOOL_OUTPUT_CHARS = 4_000
MAX_CODE_CHARS = 24_000
MAX_ECHO_CHARS = 3_000


def bound(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its head cut at a word boundary and a marker."""
    if len(text) <= limit:
        return text
    marker = " [... {} more characters left out]"
    room = max(0, limit - len(marker) - 8)
    head = text[:room]
    cut = head.rfind(" ")
    if cut > room * 0.7:
        head = head[:cut]
    return head.rstrip() + marker.format(len(text) - len(head))


def bound_middle(text: str, limit: int) -> str:
    """`text` if it fits, else its head and tail around a marker (for answers repeated in a re-ask)."""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2 - 40)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"
