"""Whether a run's records show a run that did its job, and if not, the one line that says why.

A run whose endpoint was down, hung or answered garbage still writes records, and its tables are all zeros:
without this, a script could not tell it from a model that tried and failed. The commands end non-zero
with this line after writing everything they have.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from kernelsage.evals.records import EpisodeRecord, StreamStop, is_harness_error
from kernelsage.models.limits import truncation_advice


def model_failure(record: EpisodeRecord) -> str | None:
    """Why this episode ended on the model, or None: its failure (the model failed rounds in a row), or a
    last round whose model call failed (a budget spent on failed calls)."""
    if is_harness_error(record):
        return None
    if record.failure:
        return record.failure
    if record.attempts and record.attempts[-1].status == "model_error":
        return record.attempts[-1].detail or "the model call failed"
    return None


def produced_code(records: Sequence[EpisodeRecord]) -> bool:
    """Some round of these episodes wrote code that reached the backend."""
    return any(a.files or a.evaluated for r in records for a in r.attempts)


def round_statuses(records: Sequence[EpisodeRecord]) -> str:
    """Rounds by status in words, e.g. "2 rounds: parse_error 2"."""
    counts = Counter(a.status for r in records for a in r.attempts)
    total = sum(counts.values())
    listed = ", ".join(f"{status} {n}" for status, n in counts.most_common())
    return f"{total} rounds" + (f": {listed}" if listed else "")


def run_problem(records_by_policy: Mapping[str, Sequence[EpisodeRecord]], *, model: str,
                stopped: StreamStop | None = None) -> str | None:
    """The one line a run that did not do its job ends with (naming the cause and the model's endpoint), or
    None: the stream stopped on the model, an episode ended on a failed model call, or no round produced
    code. Tasks the harness could not run are the suite's problem, reported in their records."""
    records = [r for policy_records in records_by_policy.values() for r in policy_records]
    if stopped is not None:
        return f"{stopped.sentence()} (model {model})"
    failed = [(r, reason) for r in records if (reason := model_failure(r)) is not None]
    if failed:
        record, reason = failed[-1]
        return (f"the model {model} failed in {len(failed)} of {len(records)} episodes; last, {record.task_id}: "
                f"{reason}")
    runnable = [r for r in records if not is_harness_error(r)]
    if runnable and not produced_code(runnable):
        return f"no round produced code ({round_statuses(runnable)}) from the model {model}: {_advice(runnable)}"
    return None


def _advice(records: Sequence[EpisodeRecord]) -> str:
    """What to fix when no round produced code: the output limit when answers were cut off, the format when
    they could not be read."""
    statuses = {a.status for r in records for a in r.attempts}
    advice = [truncation_advice()] if "truncated" in statuses else []
    if "parse_error" in statuses or not advice:
        advice.append("check that it answers in the format the prompts ask for")
    return "; ".join(advice)
