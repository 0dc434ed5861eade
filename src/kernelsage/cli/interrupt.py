"""Ctrl-C or SIGTERM during a run: stop within seconds, and say what was kept and how to go on.

SIGTERM (what `kill`, `timeout`, systemd, Docker and CI send) is handled as Ctrl-C is: the same line, the
same exit code (130, EXIT_INTERRUPTED), so a run stopped by a supervisor says how to resume it too.

Python raises KeyboardInterrupt only when the main thread next runs Python code, and the unwinding that
follows may wait on work that cannot be interrupted (a model call in flight in a worker thread, a native
library loading, the database starting). So the signal also wakes a watchdog thread through
`signal.set_wakeup_fd`, which the C-level handler writes at once: if the process has not exited
GRACE_S seconds later, the watchdog says the message and ends it. The run loses nothing by that: finished
episodes are in their JSONL file and the episode in progress resumes from its last checkpoint.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import typer

from kernelsage.cli.common import EXIT_INTERRUPTED, err_console, say
from kernelsage.cli.invocation import program

GRACE_S = 3.0  # seconds the normal unwinding gets before the watchdog ends the process
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # both stop a run the same way


def interrupted_message(run_dir: Path, run_id: str, command: str) -> str:
    """What an interrupted run leaves, in one line: the finished episodes and where, or that nothing was
    written yet; and the command that goes on from there."""
    resume = f"resume with `{program()} {command} --run-id {run_id}` and the same options"
    episodes = _recorded_episodes(run_dir)
    if episodes:
        return f"interrupted: {episodes} finished episodes are kept in {run_dir}; {resume}"
    if run_dir.is_dir():
        return (f"interrupted before any episode finished ({run_dir} holds no records yet); {resume} (an episode "
                "in progress goes on from its last step)")
    return f"interrupted before the run started: nothing was written ({run_dir} does not exist)"


def _recorded_episodes(run_dir: Path) -> int:
    try:
        return sum(1 for path in run_dir.glob("*.jsonl")
                   for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError:
        return 0


class _Watchdog:
    """Said-once bookkeeping shared by the main thread and the watchdog thread."""

    def __init__(self, message: Callable[[], str], grace_s: float) -> None:
        self.message = message
        self.grace_s = grace_s
        self.lock = threading.Lock()
        self.said = False
        self.signals = 0

    def say_once(self) -> None:
        # Said under the lock: the watchdog's give_up waits for a line the main thread is printing instead of
        # ending the process in the middle of it (seen: a second signal left stderr empty).
        with self.lock:
            if self.said:
                return
            self.said = True
            say(self.message(), to=err_console)

    def watch(self, wakeup: socket.socket) -> None:
        while True:
            try:
                data = wakeup.recv(64)
            except OSError:
                return  # the block ended and closed the socket
            if not data:
                return
            stops = sum(data.count(number) for number in STOP_SIGNALS)
            if not stops:
                continue
            self.signals += stops
            timer = threading.Timer(0 if self.signals > 1 else self.grace_s, self.give_up)
            timer.daemon = True
            timer.start()

    def give_up(self) -> None:
        self.say_once()
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        os._exit(EXIT_INTERRUPTED)


@contextmanager
def interruptible(message: Callable[[], str], *, grace_s: float = GRACE_S) -> Iterator[None]:
    """Within the block, Ctrl-C or SIGTERM prints `message()` once on stderr and exits 130: through the normal
    unwinding when it is quick, else after `grace_s` seconds; a second signal ends the process at once."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    watchdog = _Watchdog(message, grace_s)
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    # default_int_handler raises KeyboardInterrupt whichever signal it handles: SIGTERM unwinds as Ctrl-C does
    previous_handlers = {number: signal.signal(number, signal.default_int_handler) for number in STOP_SIGNALS}
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    threading.Thread(target=watchdog.watch, args=(reader,), daemon=True, name="ctrl-c-watchdog").start()
    try:
        yield
    except KeyboardInterrupt:
        watchdog.say_once()
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        signal.set_wakeup_fd(previous_fd)
        for number, handler in previous_handlers.items():
            signal.signal(number, handler)
        writer.close()
        with suppress(OSError):
            reader.shutdown(socket.SHUT_RDWR)  # wakes the watchdog's recv, which then returns
        reader.close()
