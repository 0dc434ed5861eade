"""Static safeguards that only concern Ascend candidates (the shared ones in `kernelsage.tools.safeguards`
apply too): no aclnn or ACL operator calls in place of the kernel, no runtime calls that would sidestep the
harness (synchronising or switching its stream and device, allocating behind its back)."""

from __future__ import annotations

import re

from kernelsage.tools.safeguards import Violation

LIBRARY = "calls a high-level library instead of computing the kernel itself"
ASCEND_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("aclnn", re.compile(r"#\s*include\s*[<\"]aclnn|\baclnn[A-Z]\w*\s*\(|\baclop\w*\s*\("), LIBRARY + " (aclnn/aclop)"),
    ("runtime", re.compile(r"\baclrt(SetDevice|ResetDevice|SynchronizeDevice|SynchronizeStream|CreateStream|"
                           r"DestroyStream|SetCurrentContext|CreateContext|Malloc\w*|Free\w*)\s*\("),
     "manages the device, stream or memory itself (the harness owns them: use npu->stream and npu->workspace)"),
)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def scan_ascend(files: dict[str, str]) -> list[Violation]:
    """Violations of the Ascend rules in op_kernel / kernel sources (op_host code may use the host APIs an
    OpDef needs); comments are ignored."""
    found = []
    for name, text in files.items():
        if name.startswith("op_host/"):
            continue
        clean = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for rule, pattern, reason in ASCEND_RULES:
            for match in pattern.finditer(clean):
                line = clean.count("\n", 0, match.start()) + 1
                found.append(Violation(file=name, line=line, rule=rule, reason=reason,
                                       excerpt=text.splitlines()[line - 1].strip()[:120]))
    return found
