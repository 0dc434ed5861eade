"""A kept removal as a cold experience item: the optimization, when it pays, the measured gain, the diff (pure)."""

from __future__ import annotations

import difflib

from kernelsage.memory_backend.items import NewItem
from kernelsage.mining.proposals import Variant
from kernelsage.mining.sources import KnownKernel
from kernelsage.mining.verdict import Gain
from kernelsage.tasks.model import Task

PROVENANCE = "mined"
MAX_DIFF_CHARS = 16_000  # a code example shown to the model stays readable (the store takes up to 64,000)


def slow_to_fast_diff(variant: Variant, kernel: KnownKernel) -> str:
    """The unified diff from the variant (slow, without the optimization) to the known-good kernel (fast)."""
    parts = []
    for name, fast in kernel.files.items():
        slow = variant.files.get(name, "")
        parts.extend(difflib.unified_diff(slow.splitlines(keepends=True), fast.splitlines(keepends=True),
                                          fromfile=f"{name} (without {variant.optimization})",
                                          tofile=f"{name} (with it)"))
    diff = "".join(parts)
    if len(diff) <= MAX_DIFF_CHARS:
        return diff
    return diff[:MAX_DIFF_CHARS] + f"\n... ({len(diff) - MAX_DIFF_CHARS:,} more characters of the diff left out)\n"


def lesson_item(kernel: KnownKernel, task: Task, variant: Variant, gain: Gain) -> NewItem:
    """The experience a kept removal teaches, with provenance "mined" and the source kernel's hash."""
    text = (f"{variant.optimization} ({task.category}, {task.id}): {variant.what} Removing it from a correct "
            f"{task.id} kernel made it {gain.ratio:.2f}x slower.")
    evidence = (f"mined: the kernel without {variant.optimization} took {gain} the time of the kernel with it "
                "(median ratio, each relative to the reference measured beside it; ~95% interval), both verified "
                "correct, profiled back to back")
    return NewItem(
        text=text, evidence=evidence, code_example=slow_to_fast_diff(variant, kernel), operator=task.id,
        kind="experience",
        metadata={"provenance": PROVENANCE, "source_sha256": kernel.sha256, "source": kernel.origin,
                  "optimization": variant.optimization, "category": task.category, "gain": gain.to_dict()},
    )
