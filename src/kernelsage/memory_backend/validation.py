"""What the store accepts: limits on sizes and checks of every value a caller hands in, before any write.

Each check raises a kernelsage error that names the value and the limit, so a bad episode or item is
refused whole (nothing changed) instead of failing half-way in the database driver.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import get_args

import numpy as np

from kernelsage.errors import EmbeddingValueError, EpisodeError, ItemError, QueryError
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.records import EpisodeTrace, Stage

MAX_TEXT_CHARS = 8_000  # an item's retrieval text (a rule is a few sentences; the hot budget is 10K tokens)
MAX_DETAIL_CHARS = 64_000  # evidence, code example, an item's or episode's metadata as JSON
MAX_RATIONALE_CHARS = 2_000  # one adoption rationale (the method asks for one sentence)
MAX_NAME_CHARS = 200  # episode id, operator, policy, kind
MAX_EXPOSURES = 20_000  # shown-item records of one episode
MAX_ROUNDS = 10_000  # round outcomes of one episode, and the highest round number
MAX_NEW_ITEMS = 200_000  # items added in one call (bulk loads)
MAX_EPISODE_ITEMS = 1_000  # experiences stored with one episode
MAX_ITEM_ID = 2**63 - 1
MAX_FETCH = 10_000_000  # items one search or listing may return (a pool, k, a page of the LangGraph view)
MAX_LEVEL = 1_000  # an episode's difficulty level (1-3 in the benchmarks)
ITEM_KINDS = ("experience", "knowledge", "rule")
STAGES = get_args(Stage)
_PLAIN_NUMBERS = {float, int}  # element types of an embedding list that need no closer look (bool is not int here)


def text_problem(value: str) -> str | None:
    """Why PostgreSQL (or an embedding model) cannot take `value` as text, or None: a NUL character, which
    PostgreSQL text cannot hold, or a lone surrogate, which UTF-8 cannot encode."""
    nul = value.find("\x00")
    if nul >= 0:
        return f"contains a NUL character at position {nul} (PostgreSQL text cannot hold one): remove it"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"contains a lone surrogate {value[exc.start]!r} at position {exc.start}, which is not valid "
                "Unicode (half of a UTF-16 pair, or bytes decoded with errors='surrogateescape'): "
                "decode the source with errors='replace'")
    return None


def check_text(value: object, what: str, limit: int, *, required: bool = False,
               error: type[Exception] = ItemError) -> None:
    """A string within `limit` characters that PostgreSQL text can hold (`text_problem`)."""
    if not isinstance(value, str):
        raise error(f"{what} must be text, not {type(value).__name__}")
    if required and not value.strip():
        raise error(f"{what} is empty")
    if len(value) > limit:
        raise error(f"{what} has {len(value):,} characters; the limit is {limit:,}: shorten it")
    problem = text_problem(value)
    if problem:
        raise error(f"{what} {problem}")


def check_query_text(value: object) -> None:
    """A text query an embedding model can read: valid Unicode without NUL characters (any length)."""
    if not isinstance(value, str):
        raise QueryError(f"the query must be text or an embedding, not {type(value).__name__}")
    problem = text_problem(value)
    if problem:
        raise QueryError(f"the query text {problem}")


def check_embedding(value: object, what: str) -> None:
    """One flat sequence of real numbers (a list, a tuple or a one-dimensional numpy array); its length and
    values are the namespace's to check (`vectors.checked_vector`)."""
    if isinstance(value, (str, bytes)):
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise EmbeddingValueError(f"{what} is text ({shown!r}), not a list of numbers: parse it first "
                                  "(json.loads for a JSON array)")
    if not isinstance(value, (Sequence, np.ndarray)):
        raise EmbeddingValueError(f"{what} is a {type(value).__name__}, not a list of numbers")
    if isinstance(value, (list, tuple)) and set(map(type, value)) <= _PLAIN_NUMBERS:
        return  # the usual list of floats, told apart at half the cost of numpy's inference below
    try:
        array = np.asarray(value)  # the element type numpy finds says what the values are
    except ValueError:  # ragged nesting
        array = np.asarray(value, dtype=object)
    if array.ndim != 1:
        raise EmbeddingValueError(f"{what} is nested (shape {array.shape}): an embedding is one flat list of "
                                  "numbers; pass each vector on its own")
    if array.dtype.kind in "iuf":
        return
    kinds = {"b": "true/false values", "c": "complex numbers", "U": "text", "S": "bytes"}
    if array.dtype.kind in kinds:
        raise EmbeddingValueError(f"{what} holds {kinds[array.dtype.kind]}; an embedding holds real numbers")
    found = next(((n, x) for n, x in enumerate(value)
                  if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating))), None)
    if found is None:  # numbers numpy keeps as objects (integers beyond 64 bits): checked_vector sizes them
        return
    position, bad = found
    kind = "a nested list" if isinstance(bad, (Sequence, np.ndarray)) and not isinstance(bad, str) else repr(bad)[:40]
    raise EmbeddingValueError(f"{what} holds {kind} at position {position}; an embedding is one flat list of "
                              "real numbers")


def check_count(value: object, what: str, *, minimum: int = 1, limit: int = MAX_FETCH) -> int:
    """A whole number of items in [minimum, limit] (not a bool, not a float): the size of a search or a page."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not minimum <= value <= limit:
        raise ItemError(f"{what} is {value!r}; it must be a whole number from {minimum:,} to {limit:,}")
    return int(value)


def _check_json(value: object, what: str, error: type[Exception]) -> None:
    """A JSON object (a dict) that jsonb can hold: finite numbers, strings `text_problem` accepts, within
    MAX_DETAIL_CHARS as JSON."""
    if not isinstance(value, dict):
        raise error(f"{what} must be a dict (a JSON object), not {type(value).__name__}")
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise error(f"{what} is not plain JSON ({exc})") from None
    if len(text) > MAX_DETAIL_CHARS:
        raise error(f"{what} is {len(text):,} characters as JSON; the limit is {MAX_DETAIL_CHARS:,}")
    for path, string in _json_strings(value):
        problem = text_problem(string)
        if problem:
            raise error(f"{what}: the {path} {problem}")


def _json_strings(value: object) -> Iterator[tuple[str, str]]:
    """Every string of a JSON-ready value (keys included), with where it is ("value at ['a'][0]", "key
    'a'"); without recursion, so nesting as deep as json.dumps allows is read."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            yield f"value at {path or 'the top'}", node
        elif isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str):
                    yield f"key {key!r}" + (f" under {path}" if path else ""), key
                stack.append((f"{path}[{key!r}]", child))
        elif isinstance(node, (list, tuple)):
            stack.extend((f"{path}[{n}]", child) for n, child in enumerate(node))


def check_new_items(items: Sequence[NewItem], limit: int = MAX_NEW_ITEMS) -> None:
    """Every item's texts, kind and metadata within the limits; at most `limit` items per call."""
    if len(items) > limit:
        raise ItemError(f"{len(items):,} items in one call; the limit is {limit:,}: add them in batches")
    for n, item in enumerate(items):
        where = f"item {n}"
        check_text(item.text, f"the text of {where}", MAX_TEXT_CHARS, required=True)
        check_text(item.evidence, f"the evidence of {where}", MAX_DETAIL_CHARS)
        if item.code_example is not None:
            check_text(item.code_example, f"the code example of {where}", MAX_DETAIL_CHARS)
        for name in ("operator", "source_episode"):
            if getattr(item, name) is not None:
                check_text(getattr(item, name), f"the {name} of {where}", MAX_NAME_CHARS)
        if item.kind not in ITEM_KINDS:
            raise ItemError(f"the kind of {where} is {item.kind!r}; use one of {', '.join(ITEM_KINDS)}")
        _check_json(item.metadata, f"the metadata of {where}", ItemError)
        if item.embedding is not None:
            check_embedding(item.embedding, f"the embedding of {where}")


def _check_latency(value: float | None, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise EpisodeError(f"{what} is {value!r}; a latency must be a finite number of seconds above 0")


def check_trace(trace: EpisodeTrace) -> None:
    """An episode the store can credit: names and texts within limits, finite positive latencies
    consistent with its rounds, well-formed exposures (each item at most once per round)."""
    check_text(trace.episode_id, "the episode id", MAX_NAME_CHARS, required=True, error=EpisodeError)
    check_text(trace.operator, f"the operator of episode {trace.episode_id!r}", MAX_NAME_CHARS, required=True,
               error=EpisodeError)
    check_text(trace.policy, "the policy name", MAX_NAME_CHARS, error=EpisodeError)
    name = f"episode {trace.episode_id!r}"
    if trace.level is not None and (isinstance(trace.level, bool) or not isinstance(trace.level, int)
                                    or not 0 <= trace.level <= MAX_LEVEL):
        raise EpisodeError(f"the level of {name} is {trace.level!r}; it must be a whole number from 0 to "
                           f"{MAX_LEVEL}, or None")
    _check_latency(trace.t_first, f"t_first of {name}")
    _check_latency(trace.t_best, f"t_best of {name}")
    if trace.t_first is None and trace.t_best is not None:
        raise EpisodeError(f"{name} has t_best={trace.t_best} but no t_first: a solved episode needs the latency "
                           "of its first correct kernel")
    if len(trace.rounds) > MAX_ROUNDS or len(trace.exposures) > MAX_EXPOSURES:
        raise EpisodeError(f"{name} has {len(trace.rounds):,} rounds and {len(trace.exposures):,} exposures; "
                           f"the limits are {MAX_ROUNDS:,} and {MAX_EXPOSURES:,}")
    for outcome in trace.rounds:
        number = outcome.round
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_ROUNDS:
            raise EpisodeError(f"{name} has an outcome of round {outcome.round!r}; rounds run from 0 to {MAX_ROUNDS}")
        if outcome.stage not in STAGES or not all(isinstance(v, bool) for v in (outcome.compiled, outcome.correct)):
            raise EpisodeError(f"round {outcome.round} of {name} has stage {outcome.stage!r}, compiled "
                               f"{outcome.compiled!r} and correct {outcome.correct!r}: the stage is one of "
                               f"{', '.join(STAGES)}, the others True or False")
        _check_latency(outcome.latency, f"the latency of round {outcome.round} of {name}")
        if outcome.correct and outcome.latency is not None and trace.t_first is None:
            raise EpisodeError(f"{name}: round {outcome.round} is correct with a latency but t_first is missing; "
                               "pass the first correct kernel's latency as t_first")
    if trace.hot_version_seen is not None and (isinstance(trace.hot_version_seen, bool)
                                               or not isinstance(trace.hot_version_seen, int)
                                               or trace.hot_version_seen < 0):
        raise EpisodeError(f"hot_version_seen of {name} is {trace.hot_version_seen!r}; it must be a version >= 0")
    _check_json(trace.metadata, f"the metadata of {name}", EpisodeError)
    for e in trace.exposures:
        if not 0 < e.item_id <= MAX_ITEM_ID:
            raise EpisodeError(f"{name} shows item id {e.item_id}, which no item can have")
        if not 0 <= e.round <= MAX_ROUNDS:
            raise EpisodeError(f"{name} has an exposure in round {e.round}; rounds run from 0 to {MAX_ROUNDS}")
        for field, value in (("relevance", e.relevance), ("score", e.score)):
            if value is not None and not math.isfinite(value):
                raise EpisodeError(f"{name}: the {field} of item {e.item_id} in round {e.round} is {value}")
        check_text(e.rationale, f"the rationale of item {e.item_id} in round {e.round} of {name}",
                   MAX_RATIONALE_CHARS, error=EpisodeError)
    twice = sorted(k for k, n in Counter((e.round, e.item_id) for e in trace.exposures).items() if n > 1)
    if twice:
        raise EpisodeError(f"{name} lists (round, item) {twice[:5]} more than once: one record per shown item")
