"""A run's events as lines, for where no live board can be drawn: a log file, CI, nohup.

On a terminal, `run`, `compare` and `demo` draw a live board; written to a file or a pipe the board shows
nothing until the end. There, each event that matters (the run's start, an episode's start and end, each
round's verdict, a model call retried, the memory's commit; kernelsage.graph.runner_events) is one line on
stderr, timestamped and flushed at once: `text` for people, `json` (one object per line) for machines.
`--log-format` asks for the lines on a terminal too.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer

from kernelsage.errors import ConfigurationError

if TYPE_CHECKING:  # the graph package loads langgraph: the command line imports it only once a run starts
    from kernelsage.graph.runner_events import Event

LOG_FORMATS = ("text", "json")
LOGGER = "kernelsage"  # the events logger and every module's warnings (a model call retried) below it

LogFormatOption = typer.Option(
    None, "--log-format",
    help="Print one line per event on stderr (run and episode start and end, round verdicts, model retries, "
         "memory commits), timestamped: text or json (one object per line). Default: text when stderr is "
         "not a terminal (a log file, CI), none on a terminal, where the live board shows progress.")


class EventFormatter(logging.Formatter):
    """One line per record: `<time> <event>: <message>`, or a JSON object with the event's fields."""

    def __init__(self, log_format: str) -> None:
        super().__init__()
        self.log_format = log_format

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="seconds")
        event = getattr(record, "event", None) or record.levelname.lower()
        message = " ".join(record.getMessage().split())  # one line, whatever the message held
        if self.log_format == "json":
            fields: dict[str, Any] = getattr(record, "fields", None) or {}
            return json.dumps({"time": moment, "event": event, "message": message, **fields}, default=str)
        return f"{moment} {event}: {message}"


class StderrLines(logging.Handler):
    """Writes each record to the stderr of the moment (a live board on a terminal redirects it above the
    board) and flushes at once, so a log file shows the line when it happens."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def check_log_format(log_format: str | None) -> None:
    if log_format is not None and log_format not in LOG_FORMATS:
        raise ConfigurationError(f"--log-format {log_format!r}: choose {' or '.join(LOG_FORMATS)}")


@contextmanager
def event_lines(log_format: str | None, *, terminal: bool) -> Iterator[None]:
    """While the block runs, print the events on stderr: in `log_format` when one is given, else as text
    when stderr is not a `terminal` (on a terminal the live board stands for them)."""
    check_log_format(log_format)
    if log_format is None and terminal:
        yield
        return
    logger = logging.getLogger(LOGGER)
    handler = StderrLines(level=logging.INFO)
    handler.setFormatter(EventFormatter(log_format or "text"))
    level = logger.level
    logger.addHandler(handler)
    if level == logging.NOTSET or level > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_started(*, command: str, run_id: str, run_dir: str, policies: list[str], model: str) -> Event:
    from kernelsage.graph.runner_events import Event

    return Event("run_start", f"{command} {run_id}: policies {', '.join(policies)}, model {model}; records in "
                              f"{run_dir}; loading the suite, the embedding model and the memory database",
                 {"command": command, "run_id": run_id, "run_dir": run_dir, "policies": policies, "model": model})


def episode_finished(policy: str, record: Any, *, kept: bool) -> Event:
    """An episode's end from its record (`kept`: recorded by an earlier run of the same id, not run again)."""
    from kernelsage.evals.report import speedup_words
    from kernelsage.graph.runner_events import Event

    if kept:
        words = "kept from an earlier run"
    elif record.solved:
        words = f"solved, {speedup_words(record.speedup)}"
    else:
        words = f"not solved ({' '.join(str(record.failure).split())[:160]})" if record.failure else "not solved"
    return Event("episode_end", f"{record.task_id} (policy {policy}, #{record.position + 1}): {words}; "
                                f"{record.rounds} rounds, {record.seconds:.0f} s",
                 {"operator": record.task_id, "policy": policy, "position": record.position,
                  "episode_id": record.episode_id, "solved": record.solved, "speedup": record.speedup,
                  "rounds": record.rounds, "seconds": round(record.seconds, 1), "failure": record.failure,
                  "kept": kept})
