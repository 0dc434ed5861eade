"""The tuning part of `scripts/validate_ascend.sh`'s report: every configuration `kernelsage tune --json` tried
on the device with its verdict and speed against the torch_npu reference, the winner and why, the best against
the default, and the evaluations spent. `python -m kernelsage.tools.ascend.tuning_report <tune.json> <tune.err>`
prints it and exits 1 when tuning failed: no result (the command's last stderr line says why), or a
configuration that was not correct (the tunable example is written to be correct for every allowed value)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kernelsage.tools.ascend.validation_report import last_line, load_json


def _values(values: dict[str, int]) -> str:
    return " ".join(f"{name}={value}" for name, value in values.items())


def _speed(tried: dict[str, Any]) -> str:
    candidate, reference = tried.get("candidate") or {}, tried.get("reference") or {}
    if not candidate.get("median") or not reference.get("median"):
        return "not timed"
    return (f"{reference['median'] / candidate['median']:.2f}x torch_npu (kernel {candidate['median'] * 1e6:.1f} us, "
            f"median of its latest profile)")


def render(result: Any, stderr_tail: str) -> tuple[str, bool]:
    """The tuning section's text and whether tuning failed."""
    if not isinstance(result, dict) or "winner" not in result:
        return f"tuning: no result\n  - surprise: tuning failed: {stderr_tail}", True
    tried = result.get("tried") or []
    lines = [f"tuning {result.get('task_id')}: {len(tried)} of {result.get('space_size')} configurations tried"]
    for t in tried:
        mark = " (default)" if t.get("is_default") else " (winner)" if t.get("values") == result["winner"] else ""
        speed = _speed(t) if t.get("verdict") == "correct" else (t.get("message") or "")[:160]
        lines.append(f"  {_values(t.get('values') or {})}{mark}: {t.get('verdict')}: {speed}")
    lines.append(f"winner: {_values(result['winner'])}: {result.get('decision')}")
    if result.get("gain"):
        median, low, high = result["gain"]
        lines.append(f"best found against the default: {median:.2f}x (interval {low:.2f}x to {high:.2f}x)")
    lines.append(f"evaluations: {result.get('evaluations')} of a budget of {result.get('budget')}")
    wrong = [t for t in tried if t.get("verdict") != "correct"]
    lines += [f"  - surprise: tuning failed: {_values(t.get('values') or {})} was {t.get('verdict')}: "
              f"{(t.get('message') or '')[:160]}" for t in wrong]
    return "\n".join(lines), bool(wrong)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m kernelsage.tools.ascend.tuning_report <tune.json> <tune.err>", file=sys.stderr)
        return 2
    text, failed = render(load_json(Path(argv[1])), last_line(Path(argv[2])))
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
