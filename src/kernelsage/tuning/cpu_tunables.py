"""Tunables of a cpu kernel: `KS_TUNABLE(NAME, default, other values...)` lines (kernelsage_cpu.h), read from the
source as text, and applied by a generated `ks_tuning.h` that the ABI header includes when it is present. The
reader and the header's text are shared with the Ascend dialect (`ascend_tunables`), whose header declares the
same macro."""

from __future__ import annotations

import re

from kernelsage.tuning.space import Config, Tunable, TuningError, TuningSpace, grid_space

TUNING_HEADER = "ks_tuning.h"
DECLARATION = re.compile(r"\bKS_TUNABLE\s*\(")
ARGUMENTS_END = re.compile(r"[();]")  # a declaration's ')' comes before any other parenthesis or statement end
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INTEGER = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*")
COMMENT_OR_STRING = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)


def _blank(match: re.Match[str]) -> str:
    # Keep the newlines so that line numbers still point at the source.
    return re.sub(r"[^\n]", " ", match.group(0))


def parse_cpu_tunables(source: str, file: str = "kernel.cpp") -> list[Tunable]:
    """The `KS_TUNABLE(...)` declarations of a C++ source, in order (comments and strings ignored, as is the
    macro's own `#define`). A malformed one raises TuningError naming its line."""
    code = COMMENT_OR_STRING.sub(_blank, source)
    found: list[Tunable] = []
    for match in DECLARATION.finditer(code):
        line = code.count("\n", 0, match.start()) + 1
        line_start = code.rfind("\n", 0, match.start()) + 1
        if re.match(r"\s*#\s*define\b", code[line_start:match.start()]):
            continue
        end = ARGUMENTS_END.search(code, match.end())
        if end is None or end.group() != ")":
            raise TuningError(f"{file}:{line}: KS_TUNABLE( is not closed by ')' before the next '(' or ';'")
        found.append(_declaration(code[match.end():end.start()], file, line))
    names = [t.name for t in found]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise TuningError(f"{file}: KS_TUNABLE declares {', '.join(repeated)} more than once")
    return found


def _declaration(arguments: str, file: str, line: int) -> Tunable:
    parts = [part.strip() for part in arguments.split(",")]
    name, texts = parts[0], parts[1:]
    where = f"{file}:{line}: KS_TUNABLE({' '.join(arguments.split())})"  # one line, whatever the declaration's
    if not IDENTIFIER.fullmatch(name):
        raise TuningError(f"{where}: the first argument must be the parameter's name, got {name!r}")
    if not texts or texts == [""]:
        raise TuningError(f"{where}: list the allowed values after the name (the first is the default)")
    values = []
    for text in texts:
        number = INTEGER.fullmatch(text)
        if number is None:
            raise TuningError(f"{where}: {text!r} is not an integer literal (allowed values are integers)")
        sign, digits = number.groups()
        values.append(int(sign + digits, 0))
    if len(set(values)) != len(values):
        raise TuningError(f"{where}: a value is listed twice")
    return Tunable(name, tuple(values), line)


def macro_space(files: dict[str, str], header: str, macro_header: str) -> TuningSpace:
    """The grid of the `KS_TUNABLE` declarations in `files` (every combination of their values). `header`: the
    name the tuner's generated header takes among the candidate's files, which the candidate may not use;
    `macro_header`: kernelsage's header that defines the macro, named when nothing is declared."""
    if header in files:
        raise TuningError(f"the candidate brings its own {header}: that name is the tuner's (rename it)")
    tunables = [t for name, text in sorted(files.items()) for t in parse_cpu_tunables(text, name)]
    if not tunables:
        raise TuningError("no tunable parameters declared: add KS_TUNABLE(NAME, default, other values...) lines "
                          f"(see {macro_header})")
    return grid_space(tunables)


def tuning_header(config: Config) -> str:
    """The text of the generated header that sets every parameter of `config` (`KS_TUNE_<name>`)."""
    lines = [f"#define KS_TUNE_{name} KS_TUNED({value})" for name, value in config]
    return "/* written by kernelsage tune */\n" + "\n".join(lines) + "\n"


def cpu_space(files: dict[str, str]) -> TuningSpace:
    """The grid of a cpu candidate's declared tunables (every combination of their values)."""
    return macro_space(files, TUNING_HEADER, "kernelsage_cpu.h")


def apply_cpu_config(files: dict[str, str], config: Config) -> dict[str, str]:
    """The candidate's files with `ks_tuning.h` setting every parameter of `config`."""
    return {**files, TUNING_HEADER: tuning_header(config)}
