"""C and C++ through the host's preprocessor, as the cpu backend's compiler would read them.

The preprocessor decides what code exists: `#if 0` and `#ifdef NEVER_DEFINED` branches, comments (also a `//`
comment a backslash continues), raw strings, digit separators, `_Pragma("...")` (it becomes a `#pragma`),
macros (used ones expand, unused ones vanish). The cpu backend builds with the host C++ compiler
(`CpuBackend.compiler`, g++ by default) at `-std=c++17 -march=native -fopenmp`; the audit runs the same
compiler with the same language flags and `-E -P`. Ascend C has no CANN compiler here: it goes through the
same host preprocessor in C++17 mode (the Ascend headers' macros are unknown to it, so `__aicore__` or
`GM_ADDR` stay names).

The text is the model's, so it is untrusted. Before it reaches the preprocessor, lines are spliced, comments
blanked and every directive that reads a file (`#include`, `#include_next`, `#import`, `#embed`, spelt with
`#` or `%:`) removed: an include path is never evidence, and a missing header (Ascend's kernel_operator.h)
must not fail the run. The preprocessor then runs with no shell, reading the text on stdin, with `-nostdinc
-nostdinc++` and an environment holding only PATH and the C locale (no CPATH and the like), under a time, a
memory and an output-size limit, in the sandbox the backends compile candidates in (bubblewrap: read-only system
directories and nothing else of the host, no network), so what `__has_include` can ask about is what a
candidate's own compile could. When it fails (syntax it rejects, `#error`, no compiler, a limit), the caller
reads the unpreprocessed text instead and says so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from kernelsage.tools.isolation import Rlimits, detect, popen_options, sandboxed

TIMEOUT_S = 10.0  # a preprocessor still running after this is stopped (a macro bomb)
MAX_OUTPUT_BYTES = 8_000_000  # and so is one whose output grows past this
POLL_S = 0.002
LANGUAGE_FLAGS = ("-std=", "-march=", "-mcpu=", "-fopenmp")  # the build flags that change what cpp makes
FILE_DIRECTIVE = re.compile(r"^[ \t\f\v]*(?:#|%:)[ \t\f\v]*(?:include|include_next|import|embed)\b.*$", re.M)
LEXEMES = re.compile(
    r'(?P<raw>R"(?P<delim>[^ ()\\\t\n]{0,16})\([\s\S]*?\)(?P=delim)")'
    r'|(?P<string>"(?:\\.|[^"\\\n])*")'
    r"|(?P<char>(?<![\w'])'(?:\\.|[^'\\\n]){1,8}')"
    r"|(?P<block>/\*[\s\S]*?(?:\*/|\Z))"
    r"|(?P<line>//[^\n]*)"
)


@dataclass(frozen=True)
class Preprocessor:
    """The compiler whose preprocessor reads C and C++ candidates, with the flags that change its output."""

    compiler: str = "g++"
    flags: tuple[str, ...] = ("-std=c++17",)
    timeout_s: float = TIMEOUT_S


@dataclass(frozen=True)
class Preprocessed:
    """The preprocessor's output, or the prepared text and why the preprocessor did not make it."""

    text: str
    failure: str = ""


def preprocessor_for(backend: str | Any) -> Preprocessor:
    """The preprocessor for a backend (or its name): the cpu backend's own compiler and language flags; the
    host g++ at C++17 for the others (Ascend C: there is no CANN compiler here)."""
    from kernelsage.tools.cpu.build import DEFAULT_FLAGS

    name = backend if isinstance(backend, str) else getattr(backend, "name", "")
    if name != "cpu":
        return Preprocessor()
    compiler = "g++" if isinstance(backend, str) else getattr(backend, "compiler", "g++")
    flags = DEFAULT_FLAGS if isinstance(backend, str) else tuple(getattr(backend, "flags", DEFAULT_FLAGS))
    return Preprocessor(compiler=compiler, flags=tuple(f for f in flags if f.startswith(LANGUAGE_FLAGS)))


def prepared(source: str) -> str:
    """`source` spliced, its comments blanked (their line breaks kept) and its file-reading directives
    removed: what the preprocessor is given, and what is parsed when it fails."""
    spliced = re.sub(r"\\[ \t]*\r?\n", "", source)

    def blank(match: re.Match[str]) -> str:
        if match.lastgroup in ("block", "line"):
            return "\n" * match.group(0).count("\n") or " "
        return match.group(0)

    return FILE_DIRECTIVE.sub("", LEXEMES.sub(blank, spliced))


def preprocess(source: str, preprocessor: Preprocessor) -> Preprocessed:
    """Run `preprocessor` over `source` (prepared first); never raises for what the source holds."""
    text = prepared(source)
    compiler = shutil.which(preprocessor.compiler)
    if compiler is None:
        return Preprocessed(text, f"no compiler {preprocessor.compiler!r} on PATH")
    command = [compiler, "-x", "c++", *preprocessor.flags, "-E", "-P", "-w", "-nostdinc", "-nostdinc++", "-"]
    output, failure = _run(command, text, preprocessor.timeout_s)
    return Preprocessed(text, failure) if failure else Preprocessed(output)


def _run(command: list[str], text: str, timeout_s: float) -> tuple[str, str]:
    """The preprocessor's output for `text` (its stdin), and why it failed ("" when it did not). It runs in the
    sandbox the backends compile candidates in (no file of the host but the read-only system directories, no
    network, no environment but PATH and the C locale) where bubblewrap works, else merely limited."""
    isolation = detect()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    limits = Rlimits(cpu_s=int(timeout_s) + 1, address_space=2 << 30, processes=64)
    with tempfile.TemporaryFile() as source, tempfile.TemporaryFile() as errors:
        source.write(text.encode("utf-8", "surrogateescape"))
        source.seek(0)
        try:
            process = subprocess.Popen(sandboxed(isolation, command, env=env, limits=limits), stdin=source,
                                       stdout=subprocess.PIPE, stderr=errors, env=env, **popen_options(isolation))
        except OSError as exc:  # no process to start (a limit of the host): read without the preprocessor
            return "", f"the preprocessor could not start ({exc.strerror or type(exc).__name__})"
        assert process.stdout is not None
        chunks: list[bytes] = []
        size, deadline = 0, time.monotonic() + timeout_s
        os.set_blocking(process.stdout.fileno(), False)
        while True:
            chunk = process.stdout.read(1 << 16)
            if chunk:
                chunks.append(chunk)
                size += len(chunk)
            elif chunk == b"" and process.poll() is not None:
                break
            if size > MAX_OUTPUT_BYTES or time.monotonic() > deadline:
                process.kill()
                process.wait()
                return "", ("the preprocessor's output passed its size limit" if size > MAX_OUTPUT_BYTES
                            else f"the preprocessor ran past {timeout_s:g} s")
            if not chunk:
                time.sleep(POLL_S)
        process.stdout.close()
        if process.returncode != 0:
            errors.seek(0)
            first = next((line for line in errors.read().decode(errors="replace").splitlines() if "error" in line),
                         "")
            return "", f"the preprocessor failed ({first.replace('<stdin>:', 'line ')[:160] or 'no message'})"
    return b"".join(chunks).decode("utf-8", errors="replace"), ""
