"""`kernelsage demo`: the offline demonstration (answers replayed from a recording)."""

from __future__ import annotations

from pathlib import Path

import typer

from kernelsage.cli.common import JsonOption, console, err_console, print_json
from kernelsage.errors import CassetteMissError, ConfigurationError


def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Where the records and the report go."),
    as_json: bool = JsonOption,
) -> None:
    """Six operators across three levels on the CPU backend, with a fresh embedded database kept in
    OUT/db and the model's answers replayed from a recording: no network, no API key."""
    from kernelsage.demo.run import recording_path, run_demo
    from kernelsage.models.cassette import ReplayChatModel

    path = recording_path()
    if not path.is_file():
        raise ConfigurationError(f"the demo recording {path} is missing: run `python -m kernelsage.demo.record`")
    try:
        result = run_demo(model=ReplayChatModel(path=path), out_dir=out, console=err_console if as_json else console)
    except CassetteMissError as exc:
        raise CassetteMissError(
            f"{exc} — the prompts of this version differ from the recording (a different compiler can change "
            "error texts): re-record it with `python -m kernelsage.demo.record`"
        ) from exc
    if as_json:
        print_json({"report": result["report"], "markdown": result["markdown"], "hot_rules": result["hot_rules"],
                    "database": result["database"], "namespace": result["namespace"], "inspect": result["inspect"],
                    "episodes": [r.model_dump(include={"task_id", "solved", "speedup", "self_speedup"})
                                 for r in result["records"]["sage"]]})
