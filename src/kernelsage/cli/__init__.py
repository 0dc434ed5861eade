"""The `kernelsage` command."""

from __future__ import annotations

import typer

from kernelsage import __version__
from kernelsage.cli.common import run_guarded
from kernelsage.cli.demo import demo
from kernelsage.cli.doctor import doctor
from kernelsage.cli.evaluate import evaluate
from kernelsage.cli.memory import memory_app
from kernelsage.cli.runs import compare, report, run
from kernelsage.cli.simulate import simulate
from kernelsage.cli.tasks import check, tasks_app
from kernelsage.cli.tune import tune

app = typer.Typer(
    name="kernelsage",
    help="Teach a frozen LLM to write fast, correct accelerator kernels by evolving an external memory.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(memory_app, name="memory")
app.add_typer(tasks_app, name="tasks")
app.command("check")(check)
app.command("demo")(demo)
app.command("run")(run)
app.command("compare")(compare)
app.command("report")(report)
app.command("eval")(evaluate)
app.command("doctor")(doctor)
app.command("simulate")(simulate)
app.command("tune")(tune)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kernelsage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """kernelsage: memory-evolving kernel agent."""


def main() -> None:
    """Console-script entry point: expected failures print one line, never a traceback."""
    run_guarded(app)
