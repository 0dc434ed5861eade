"""What the store accepts: limits on sizes and checks of every value a caller hands in, before any write.

Each check raises a kernelsage error that names the value and the limit, so a bad episode or item is
refused whole (nothing changed) instead of failing half-way in the database driver.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from kernelsage.errors import EpisodeError, ItemError
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.records import EpisodeTrace

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
ITEM_KINDS = ("experience", "knowledge", "rule")


def check_text(value: object, what: str, limit: int, *, required: bool = False,
               error: type[Exception] = ItemError) -> None:
    """A string within `limit` characters, without NUL characters (PostgreSQL text cannot hold them)."""
    if not isinstance(value, str):
        raise error(f"{what} must be text, not {type(value).__name__}")
    if required and not value.strip():
        raise error(f"{what} is empty")
    if len(value) > limit:
        raise error(f"{what} has {len(value):,} characters; the limit is {limit:,}: shorten it")
    if "\x00" in value:
        raise error(f"{what} contains a NUL character")


def check_count(value: object, what: str, *, minimum: int = 1, limit: int = MAX_FETCH) -> int:
    """A whole number of items in [minimum, limit] (not a bool, not a float): the size of a search or a page."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not minimum <= value <= limit:
        raise ItemError(f"{what} is {value!r}; it must be a whole number from {minimum:,} to {limit:,}")
    return int(value)


def _check_json(value: object, what: str, error: type[Exception]) -> None:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise error(f"{what} is not plain JSON ({exc})") from None
    if len(text) > MAX_DETAIL_CHARS:
        raise error(f"{what} is {len(text):,} characters as JSON; the limit is {MAX_DETAIL_CHARS:,}")
    if "\\u0000" in text:
        raise error(f"{what} contains a NUL character")


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
    _check_latency(trace.t_first, f"t_first of {name}")
    _check_latency(trace.t_best, f"t_best of {name}")
    if trace.t_first is None and trace.t_best is not None:
        raise EpisodeError(f"{name} has t_best={trace.t_best} but no t_first: a solved episode needs the latency "
                           "of its first correct kernel")
    if len(trace.rounds) > MAX_ROUNDS or len(trace.exposures) > MAX_EXPOSURES:
        raise EpisodeError(f"{name} has {len(trace.rounds):,} rounds and {len(trace.exposures):,} exposures; "
                           f"the limits are {MAX_ROUNDS:,} and {MAX_EXPOSURES:,}")
    for outcome in trace.rounds:
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
