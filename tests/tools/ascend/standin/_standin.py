"""Shared by the stand-in tools (tests only): record the call, replay diagnostics named by a marker."""

import os
import re
import sys
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
MARKER = re.compile(r"STANDIN_DIAGNOSTICS:(\w+)")
RECORD = "standin-calls.log"


def record(tool):
    with open(RECORD, "a") as log:
        log.write(f"{tool} {' '.join(sys.argv[1:])}\n")


def replay_if_marked(path, status=1):
    try:
        text = Path(path).read_text()
    except OSError:
        return
    match = MARKER.search(text)
    if match:
        sys.stderr.write(Path(HERE, "diagnostics", match.group(1) + ".txt").read_text())
        sys.exit(status)


def output_of(argv):
    return argv[argv.index("-o") + 1] if "-o" in argv else ""


def write_record_into(path):
    calls = Path(RECORD).read_text() if os.path.exists(RECORD) else ""
    with open(path, "w") as out:
        out.write("STANDIN MODULE\n" + calls)
