"""Make the demo's recording again (after a prompt changes): `python -m kernelsage.demo.record`.

The answers come from `kernelsage.demo.script`, a scripted stand-in for an LLM; the recorder writes
them, with their request keys, to `kernelsage/demo/recording.jsonl`, which `kernelsage demo` replays.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console

from kernelsage.demo.run import recording_path, run_demo
from kernelsage.demo.script import demo_answer
from kernelsage.models.cassette import RecordingChatModel
from kernelsage.models.scripted import ScriptedChatModel

MAX_REQUESTS = 500


def main() -> None:
    path = recording_path()
    path.unlink(missing_ok=True)
    model = RecordingChatModel(inner=ScriptedChatModel([demo_answer] * MAX_REQUESTS), path=path)
    with tempfile.TemporaryDirectory(prefix="kernelsage-record-") as out:
        run_demo(model=model, out_dir=Path(out), console=Console())
    print(f"recorded {sum(1 for _ in path.open())} answers to {path}")


if __name__ == "__main__":
    main()
