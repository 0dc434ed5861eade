"""Strict parsing of the generator's and optimizer's answers: candidate files and adoption records.

Nodes build prompts around `ANSWER_FORMAT`, call `parse_answer` (or `parse_adoption_only` for the
adoption gate's re-asks), and on `ParseError` ask again with `format_parse_feedback(error)`.
Every problem found is reported at once, so one re-ask can fix them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from kernelsage.errors import ParseError

# The format example's rationale: copied verbatim, it says nothing about the item, so it is rejected.
PLACEHOLDER_RATIONALE = "One sentence on why it applies or not."

ANSWER_FORMAT = """\
Answer format (strict):
1. Give every source file of the candidate as a fenced code block whose info string names the file,
   one block per file, the whole file in it:
   ```cpp file=kernel.cpp
   ...the complete file...
   ```
   The language word is optional; `file=NAME` is required; NAME is a plain file name (no folders).
2. Give one adoption block, a fenced json block with one record for EVERY memory item shown to you:
   ```json
   {"adoption": [{"id": 12, "adopted": true, "rationale": PLACEHOLDER_RATIONALE}]}
   ```
   "id" is the item's integer id, "adopted" is true or false, "rationale" is one non-empty sentence.
   Give each id once; write each rationale yourself, about that item and your code.
   Do not put triple backticks inside a file.""".replace("PLACEHOLDER_RATIONALE", f'"{PLACEHOLDER_RATIONALE}"')

_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_LANGUAGE_BY_SUFFIX = {
    ".c": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".h": "cpp",
    ".hpp": "cpp",
    ".cu": "cuda",
    ".cuh": "cuda",
    ".py": "python",
}


@dataclass(frozen=True)
class AdoptionRecord:
    """The model's verdict on one shown memory item."""

    adopted: bool
    rationale: str


@dataclass(frozen=True, kw_only=True)
class AdoptionAnswer:
    """Adoption records as given, and how they compare to the ids shown.

    `adoption` holds every record given, including ones for ids never shown (listed in `unknown_ids`);
    `missing_ids` are shown ids without a record. Both lists are sorted.
    """

    adoption: dict[int, AdoptionRecord]
    missing_ids: list[int] = field(default_factory=list)
    unknown_ids: list[int] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every shown item has a record and no record names an item that was not shown."""
        return not self.missing_ids and not self.unknown_ids


@dataclass(frozen=True, kw_only=True)
class ParsedAnswer(AdoptionAnswer):
    """A candidate's files (name to content, each ending with a newline) and its adoption records."""

    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Block:
    info: str
    body: str
    line: int  # 1-based line of the opening fence
    closed: bool = True  # False: the answer ended inside the block (e.g. cut off at the token limit)

    @property
    def words(self) -> list[str]:
        return self.info.split()

    @property
    def file_name(self) -> str | None:
        for word in self.words:
            if word.startswith("file="):
                return word[len("file=") :].strip("\"'")
        return None

    @property
    def is_json(self) -> bool:
        return self.file_name is None and bool(self.words) and self.words[0].lower() == "json"


def parse_answer(text: str, *, expected_files: Sequence[str], shown_ids: Collection[int]) -> ParsedAnswer:
    """Parse a generator/optimizer answer; raise `ParseError` listing every format problem found."""
    blocks, problems = _fenced_blocks(text)
    files = _files(blocks, expected_files, problems)
    adoption = _adoption(blocks, shown_ids, problems)
    if problems or adoption is None:  # adoption is None only when a problem was recorded
        raise ParseError(_problem_message(problems))
    return ParsedAnswer(
        files=files,
        adoption=adoption.adoption,
        missing_ids=adoption.missing_ids,
        unknown_ids=adoption.unknown_ids,
    )


def parse_adoption_only(text: str, *, shown_ids: Collection[int]) -> AdoptionAnswer:
    """Parse an answer that holds only the adoption block (the gate's re-ask)."""
    blocks, problems = _fenced_blocks(text)
    adoption = _adoption(blocks, shown_ids, problems)
    if problems or adoption is None:
        raise ParseError(_problem_message(problems))
    return adoption


def format_parse_feedback(error: ParseError) -> str:
    """The short message that asks the model again after a malformed answer."""
    return (
        f"Your previous answer could not be used: {error}\n"
        "Answer again in full, following the answer format exactly: one ```<lang> file=NAME block per "
        'file, and one ```json block {"adoption": [{"id": ..., "adopted": ..., "rationale": ...}]} '
        "covering every memory item shown."
    )


def render_answer(files: Mapping[str, str], adoption: Mapping[int, AdoptionRecord]) -> str:
    """An answer in the required format (for scripted models, demos and tests); the inverse of parsing."""
    parts = []
    for name, content in files.items():
        language = _LANGUAGE_BY_SUFFIX.get(PurePosixPath(name).suffix.lower())
        info = f"{language} file={name}" if language else f"file={name}"
        body = content if content.endswith("\n") else content + "\n"
        parts.append(f"```{info}\n{body}```")
    records = [
        {"id": item_id, "adopted": record.adopted, "rationale": record.rationale}
        for item_id, record in adoption.items()
    ]
    parts.append("```json\n" + json.dumps({"adoption": records}, indent=2, ensure_ascii=False) + "\n```")
    return "\n\n".join(parts) + "\n"


def _fenced_blocks(text: str) -> tuple[list[_Block], list[str]]:
    """Fenced blocks in the CommonMark sense: a closing fence is the same character, at least as long."""
    blocks: list[_Block] = []
    problems: list[str] = []
    # split on \n only: splitlines() would also cut at form feeds and other separators inside a file
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence = opening["fence"]
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((j for j in range(index + 1, len(lines)) if closing.match(lines[j])), None)
        if end is None:
            problems.append(
                f"the code block opened on line {index + 1} ({lines[index].strip()}) is never closed"
            )
            blocks.append(
                _Block(opening["info"].strip(), "\n".join(lines[index + 1 :]), index + 1, closed=False)
            )
            break
        blocks.append(_Block(opening["info"].strip(), "\n".join(lines[index + 1 : end]), index + 1))
        index = end + 1
    return blocks, problems


def _files(blocks: Sequence[_Block], expected_files: Sequence[str], problems: list[str]) -> dict[str, str]:
    files: dict[str, str] = {}
    for block in blocks:
        name = block.file_name
        if name is None or not block.closed:
            continue
        if not _is_safe_name(name) and name not in expected_files:  # the backend's names may have folders
            problems.append(
                f"file name {name!r} (line {block.line}) is not allowed: use a plain file name without "
                "folders, '..' or an absolute path"
            )
        elif name in files:
            problems.append(f"file {name} is given twice: give each file exactly once")
        elif name not in expected_files:
            problems.append(
                f"unexpected file {name}: the candidate consists of exactly {_listing(expected_files)}"
            )
        elif not block.body.strip():
            problems.append(f"the block for {name} (line {block.line}) is empty: give the complete file")
        else:
            files[name] = block.body + "\n"
    unnamed = [block for block in blocks if block.file_name is None and not block.is_json]
    for name in expected_files:
        if name not in files and not any(block.file_name == name for block in blocks):
            hint = f" ({len(unnamed)} code block(s) lack file=NAME in their info string)" if unnamed else ""
            problems.append(
                f"no code block for required file {name}: open it with ```<lang> file={name}{hint}"
            )
    return files


def _is_safe_name(name: str) -> bool:
    return bool(_SAFE_NAME.fullmatch(name)) and ".." not in name


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "no files"


def _adoption(
    blocks: Sequence[_Block], shown_ids: Collection[int], problems: list[str]
) -> AdoptionAnswer | None:
    json_blocks = [block for block in blocks if block.is_json and block.closed]
    if len(json_blocks) > 1:
        lines = ", ".join(str(block.line) for block in json_blocks)
        problems.append(
            f"found {len(json_blocks)} json blocks (lines {lines}): give exactly one adoption block"
        )
        return None
    if not json_blocks:
        if not shown_ids:
            return AdoptionAnswer(adoption={})
        untagged = any('"adoption"' in block.body for block in blocks if not block.is_json)
        hint = ": fence it as ```json" if untagged else ""
        problems.append(
            f"no adoption block{hint}; give one ```json block with a record for each shown id "
            f"({_listing([str(i) for i in sorted(shown_ids)])})"
        )
        return None
    block = json_blocks[0]
    try:
        document = json.loads(block.body)
    except json.JSONDecodeError as exc:
        problems.append(
            f"the adoption block (line {block.line}) is not valid JSON: {exc.msg} at its line {exc.lineno}, "
            f"column {exc.colno}"
        )
        return None
    adoption = _records(document, problems)
    if adoption is None:
        return None
    shown = set(shown_ids)
    return AdoptionAnswer(
        adoption=adoption,
        missing_ids=sorted(shown - adoption.keys()),
        unknown_ids=sorted(adoption.keys() - shown),
    )


def _records(document: Any, problems: list[str]) -> dict[int, AdoptionRecord] | None:
    if not isinstance(document, dict) or not isinstance(document.get("adoption"), list):
        problems.append(
            'the adoption block must be a JSON object {"adoption": [ ... ]} with a list of records'
        )
        return None
    records: dict[int, AdoptionRecord] = {}
    seen: set[int] = set()
    problems_before = len(problems)
    for position, entry in enumerate(document["adoption"], start=1):
        if not isinstance(entry, dict):
            problems.append(f"adoption record {position} must be an object with id, adopted and rationale")
            continue
        item_id = entry.get("id")
        # bool is an int in Python, but `"id": true` is not an id.
        if not isinstance(item_id, int) or isinstance(item_id, bool):
            problems.append(f"adoption record {position}: id must be an integer, got {json.dumps(item_id)}")
            continue
        if item_id in seen:
            problems.append(f"id {item_id} has more than one adoption record: give each id once")
            continue
        seen.add(item_id)
        record = _record(item_id, entry.get("adopted"), entry.get("rationale"), problems)
        if record is not None:
            records[item_id] = record
    return records if len(problems) == problems_before else None


def _record(item_id: int, adopted: Any, rationale: Any, problems: list[str]) -> AdoptionRecord | None:
    where = f"adoption record for id {item_id}"
    valid = True
    if not isinstance(adopted, bool):
        problems.append(f"{where}: adopted must be true or false, got {json.dumps(adopted)}")
        valid = False
    if not isinstance(rationale, str):
        problems.append(f"{where}: rationale must be a string, got {json.dumps(rationale)}")
        return None
    if not rationale.strip():
        problems.append(f"{where}: rationale is empty; say in one sentence why the item applies or not")
        return None
    if _is_placeholder(rationale):
        problems.append(f"{where}: the rationale is the format example's placeholder; write one sentence of your "
                        "own on whether this item shaped your code")
        return None
    return AdoptionRecord(adopted=adopted, rationale=rationale.strip()) if valid else None


def _is_placeholder(rationale: str) -> bool:
    def words(text: str) -> str:
        return " ".join(re.findall(r"[a-z]+", text.lower()))

    return words(rationale) == words(PLACEHOLDER_RATIONALE) or rationale.strip() in ("...", "…")


def _problem_message(problems: Sequence[str]) -> str:
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems:\n" + "\n".join(f"- {problem}" for problem in problems)
