"""The report of `scripts/validate_ascend.sh`: the CANN release and layout the host has, then one row per
reference kernel with its compile, verify and profile verdicts, and every surprise (anything that is not a
clean ok) listed after the table. `python -m kernelsage.tools.ascend.validation_report <report dir>` prints
it and exits 1 when there is any surprise (0 otherwise), so one run on an Ascend host gives a complete answer.

The directory holds `doctor.json` (`kernelsage doctor --backend ascend --json`) and, per kernel, `<task>.json`
(`kernelsage check --json`) and `<task>.err` (its stderr).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    task: str
    compile: str
    verify: str
    profile: str
    surprises: tuple[str, ...]


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return lines[-1][:200] if lines else "no output"


def _first_error(compile_result: dict[str, Any]) -> str:
    errors = [e for e in compile_result.get("errors") or [] if e.get("severity") == "error"]
    if errors:
        e = errors[0]
        return f"{e.get('file') or ''}:{e.get('line', 0)}: {e.get('message', '')}"[:200]
    log = (compile_result.get("log") or "").strip().splitlines()
    return log[-1][:200] if log else ""


def kernel_row(task: str, report: dict[str, Any] | None, stderr_tail: str) -> Row:
    """The verdicts of one `kernelsage check --json` report (None: the command gave no report)."""
    if not isinstance(report, dict):
        return Row(task, f"harness error: {stderr_tail}", "-", "-", (f"{task}: no report ({stderr_tail})",))
    surprises = []
    built = report.get("compile") or {}
    if built.get("ok"):
        compiled = f"ok {float(built.get('seconds') or 0):.1f}s"
    else:
        compiled = f"{built.get('status', 'no result')}: {_first_error(built)}"
        surprises.append(f"{task}: compile {compiled}")
    verify = report.get("verify")
    if verify is None:
        verified = "not run"
    elif verify.get("correct"):
        verified = f"ok ({len(verify.get('cases') or [])} cases)"
    else:
        verified = f"{verify.get('status')}: {(verify.get('message') or '')[:160]}"
        surprises.append(f"{task}: verify {verified}")
    profile = report.get("profile")
    if profile is None:
        profiled = "not run"
    elif profile.get("ok") and profile.get("output_correct"):
        cand, ref = profile.get("candidate") or {}, profile.get("reference") or {}
        profiled = (f"{float(profile.get('speedup') or 0):.2f}x (kernel {float(cand.get('mean') or 0) * 1e6:.1f} us, "
                    f"torch_npu {float(ref.get('mean') or 0) * 1e6:.1f} us)")
    else:
        profiled = f"{profile.get('status')}: {(profile.get('message') or 'profiled output wrong')[:160]}"
        surprises.append(f"{task}: profile {profiled}")
    if built.get("ok") and (verify is None or profile is None) and not surprises:
        surprises.append(f"{task}: compiled but {'verify' if verify is None else 'profile'} did not run")
    return Row(task, compiled, verified, profiled, tuple(surprises))


def doctor_lines(checks: Any) -> tuple[dict[str, str], list[str]]:
    """The doctor's items by name, and a surprise per item that is not ok."""
    if not isinstance(checks, list):
        return {}, ["doctor: no JSON answer from `kernelsage doctor --backend ascend --json`"]
    items = {c.get("name", "?"): c.get("detail", "") for c in checks if isinstance(c, dict)}
    surprises = [f"doctor: {c.get('name')}: {c.get('status')}: {c.get('detail')}" for c in checks
                 if isinstance(c, dict) and c.get("status") != "ok"]
    return items, surprises


def render(directory: Path, tasks: list[str]) -> tuple[str, bool]:
    """The report's text and whether anything was a surprise."""
    items, surprises = doctor_lines(load_json(directory / "doctor.json"))
    rows = [kernel_row(t, load_json(directory / f"{t}.json"), last_line(directory / f"{t}.err")) for t in tasks]
    lines = [f"CANN:    {items.get('ascend CANN', 'unknown')}", f"layout:  {items.get('ascend layout', 'unknown')}",
             f"SoC:     {items.get('ascend SoC', 'unknown')}", ""]
    header = ("kernel", "compile", "verify", "profile")
    table = [header, *((r.task, r.compile, r.verify, r.profile) for r in rows)]
    widths = [min(max(len(row[i]) for row in table), 60) for i in range(4)]
    lines += ["  ".join(cell[:60].ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    everything = surprises + [s for r in rows for s in r.surprises] + ([] if rows else ["no reference kernel ran"])
    lines += ["", f"surprises: {len(everything)}", *(f"  - {s}" for s in everything)]
    return "\n".join(lines), bool(everything)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m kernelsage.tools.ascend.validation_report <report dir> [task ...]", file=sys.stderr)
        return 2
    directory = Path(argv[1])
    tasks = argv[2:] or sorted(p.stem for p in directory.glob("*.json") if p.name != "doctor.json")
    text, surprised = render(directory, tasks)
    print(text)
    return 1 if surprised else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
