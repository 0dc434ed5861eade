"""How `kernelsage doctor` reads: one entry per check, wrapped between words at any terminal width, then the
verdict: the problems (required checks that failed) with their fixes, also on stderr, or that there are none."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from kernelsage.cli.doctor import Check

STATUS_STYLES = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red")}


def problems(checks: Sequence[Check]) -> list[Check]:
    """The checks that make the doctor fail: required ones that failed."""
    return [check for check in checks if check.required and check.status == "fail"]


def warnings(checks: Sequence[Check]) -> list[Check]:
    return [check for check in checks if check.status == "warn" or (check.status == "fail" and not check.required)]


def verdict_line(checks: Sequence[Check]) -> str:
    """The last word: how many problems and which, else that everything required is here."""
    failed, warned = problems(checks), warnings(checks)
    noted = f"; {len(warned)} {_plural(len(warned), 'warning')}: {', '.join(c.name for c in warned)}" if warned else ""
    if failed:
        return f"{len(failed)} {_plural(len(failed), 'problem')}: {', '.join(c.name for c in failed)}{noted}"
    return f"no problems: every required check passed ({len(checks)} {_plural(len(checks), 'check')}{noted})"


def check_list(checks: Sequence[Check]) -> Table:
    """Status, then the name, detail and fix as words that wrap between words (a word longer than the whole
    line is folded, never cut)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, width=4)
    grid.add_column(ratio=1, overflow="fold")
    for check in checks:
        label, style = STATUS_STYLES[check.status]
        entry = Text.assemble((check.name, "bold"), f": {check.detail}")
        if check.fix:
            entry.append(f"\nfix: {check.fix}", style="dim" if check.status == "ok" else "")
        grid.add_row(Text(label, style=style), entry)
    return grid


def print_report(checks: Sequence[Check], *, out: Console | None, err: Console) -> None:
    """The checks on `out` (none under --json), then the verdict: on `out` when there is no problem, else
    on `err`, each problem with its fix, so that a script or a piped stdout still shows what to do."""
    if out is not None:
        out.print(check_list(checks))
        out.print()
    line = verdict_line(checks)
    failed = problems(checks)
    if not failed:
        (out or err).print(Text(line, style="green"))
        return
    err.print(Text(line, style="bold red"))
    err.print(check_list(failed))


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"
