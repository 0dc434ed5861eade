"""`kernelsage demo`: the offline demonstration (answers replayed from a recording)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from kernelsage.cli.common import JsonOption, console, err_console, print_json
from kernelsage.cli.interrupt import interruptible
from kernelsage.cli.invocation import program
from kernelsage.cli.run_log import LogFormatOption, event_lines
from kernelsage.errors import CassetteMissError, ConfigurationError


def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Where the records and the report go."),
    log_format: str | None = LogFormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Six operators across three levels on the CPU backend, with a fresh embedded database kept in
    OUT/db and the model's answers replayed from a recording: no network, no API key."""
    from kernelsage.demo.run import recording_path, run_demo
    from kernelsage.models.cassette import ReplayChatModel

    path = recording_path()
    if not path.is_file():
        raise ConfigurationError(f"the demo recording {path} is missing: run `python -m kernelsage.demo.record`")
    shown = err_console if as_json else console
    divergences: list[str] = []

    def diverged(difference: str) -> None:
        # a slower or busier machine can judge a round differently from the recording's (a time limit, a
        # speed verdict): the story goes on with the nearest recorded answer, and says where it differed
        divergences.append(difference)
        shown.print(f"[yellow]this machine's results differ from the recording's here; the replay answers with "
                    f"the nearest recorded answer.[/] {escape(difference)}", highlight=False)

    started_by = program()
    stopped = (f"interrupted: the demo stopped; what it wrote is in {out} and `{started_by} demo` starts it "
               "again from a fresh memory")
    try:
        with interruptible(lambda: stopped), event_lines(log_format, terminal=shown.is_terminal):
            result = run_demo(model=ReplayChatModel(path=path, on_divergence=diverged), out_dir=out,
                              console=shown, divergences=divergences, program=started_by)
    except CassetteMissError as exc:
        raise CassetteMissError(
            f"{exc} — the prompts of this version differ from the recording (a different compiler can change "
            "error texts): re-record it with `python -m kernelsage.demo.record`"
        ) from exc
    if as_json:
        print_json({"report": result["report"], "markdown": result["markdown"], "hot_rules": result["hot_rules"],
                    "database": result["database"], "namespace": result["namespace"], "inspect": result["inspect"],
                    "divergences": divergences,
                    "episodes": [r.model_dump(include={"task_id", "solved", "speedup", "self_speedup"})
                                 for r in result["records"]["sage"]]})
