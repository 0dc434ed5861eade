"""Static safeguards: reject candidates that do not compute the kernel themselves or reach outside the sandbox.

The scan works on the source with comments removed and string literals blanked (so a rule never fires on
prose), except the file-path rule, which must see the literal paths. The dynamic safeguards (fresh random
inputs per trial, several shapes, repeated calls in one process, poisoned outputs) live in the harness.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    rule: str
    reason: str
    excerpt: str

    def describe(self) -> str:
        return f"{self.file}:{self.line}: {self.reason} [{self.rule}]: {self.excerpt}"


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    reason: str


def _rule(name: str, pattern: str, reason: str) -> Rule:
    return Rule(name, re.compile(pattern), reason)


LIBRARY = "calls a high-level library instead of computing the kernel itself"
RULES: tuple[Rule, ...] = (
    _rule("torch", r"#\s*include\s*[<\"](torch|ATen|c10|caffe2)/|\b(torch|at|c10|aten)::", LIBRARY + " (PyTorch/ATen)"),
    _rule("blas", r"#\s*include\s*[<\"](cblas|mkl|lapacke|openblas|dnnl|oneapi)|\bcblas_\w+|\b[sdcz]gemm_?\s*\(|"
                  r"\bmkl_\w+|\bdnnl_\w+", LIBRARY + " (BLAS/MKL/oneDNN)"),
    _rule("eigen", r"#\s*include\s*[<\"](Eigen|eigen3|unsupported/Eigen)|\bEigen::", LIBRARY + " (Eigen)"),
    _rule("dynamic_loading", r"#\s*include\s*[<\"]dlfcn\.h|\b(dlopen|dlsym|dlmopen)\s*\(",
          "loads code at run time"),
    _rule("process", r"#\s*include\s*[<\"](spawn\.h|sys/wait\.h)|\b(system|popen|v?fork|clone|posix_spawnp?|"
                     r"exec(l|lp|le|v|vp|vpe|ve))\s*\(", "spawns a process"),
    _rule("network", r"#\s*include\s*[<\"](sys/socket\.h|netinet/|arpa/|netdb\.h)|\b(socket|connect|bind|"
                     r"getaddrinfo|gethostbyname)\s*\(", "opens a network connection"),
    _rule("assembly", r"\b(asm|__asm__|__asm)\b", "uses inline assembly (it can bypass the sandbox's checks)"),
    _rule("syscall", r"#\s*include\s*[<\"]sys/syscall\.h|\bsyscall\s*\(", "makes raw system calls"),
    _rule("memory_protection", r"\b(mprotect|ptrace|prctl|seccomp)\s*\(", "changes process protections"),
    _rule("signals", r"\b(signal|sigaction|setjmp|longjmp)\s*\(", "installs signal handlers or jumps out of "
                                                                    "faults (it hides crashes from the harness)"),
    _rule("proc_files", r"/proc/|/dev/mem", "reads process or device files"),
)

# File access is allowed only with a relative literal path without '..' (inside the private directory).
FILE_CALL = re.compile(r"\b(fopen|freopen|open|openat|creat|remove|unlink|rename|truncate|opendir|"
                       r"std::ofstream|std::ifstream|std::fstream|ofstream|ifstream|fstream)\b\s*(\w+\s*)?\(\s*"
                       r"(?P<arg>[^,)]*)")


def strip_comments_and_strings(source: str, keep_strings: bool = False) -> str:
    """The source with comments (and, unless kept, string/char literal contents) replaced by spaces.

    Newlines survive, so line numbers still match the original.
    """
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        two = source[i:i + 2]
        if two == "//":
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif two == "/*":
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(c if c == "\n" else " " for c in source[i:end]))
            i = end
        elif source[i] in "\"'":
            quote, j = source[i], i + 1
            while j < n and source[j] != quote and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            body = source[i:j]
            # #include <...> and "..." stay visible either way: the include rules need them.
            line_start = source.rfind("\n", 0, i) + 1
            is_include = re.match(r"\s*#\s*include", source[line_start:i]) is not None
            out.append(body if keep_strings or is_include else quote + " " * max(len(body) - 2, 0) + quote)
            i = j
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def scan_source(name: str, source: str) -> list[Violation]:
    """Every safeguard violation in one source file."""
    code = strip_comments_and_strings(source)
    with_strings = strip_comments_and_strings(source, keep_strings=True)
    original_lines = source.splitlines()
    violations: list[Violation] = []

    def add(offset: int, rule: str, reason: str) -> None:
        line = code.count("\n", 0, offset) + 1
        excerpt = original_lines[line - 1].strip()[:120] if line <= len(original_lines) else ""
        violations.append(Violation(name, line, rule, reason, excerpt))

    for rule in RULES:
        for match in rule.pattern.finditer(code):
            add(match.start(), rule.name, rule.reason)
    for match in FILE_CALL.finditer(with_strings):
        if code[match.start():match.start() + 1].isspace():
            continue  # the call name itself was inside a comment or string
        argument = match.group("arg").strip()
        literal = re.fullmatch(r'"([^"]*)"', argument)
        if literal is None:
            add(match.start(), "file_access", "opens a file whose path is not a literal (only relative literal "
                                              "paths inside the sandbox are allowed)")
        elif literal.group(1).startswith(("/", "~")) or ".." in literal.group(1):
            add(match.start(), "file_access", f"touches a file outside its sandbox ({literal.group(1)!r})")
    return sorted(violations, key=lambda v: (v.file, v.line))


def scan_candidate(files: dict[str, str]) -> list[Violation]:
    return [violation for name, text in sorted(files.items()) for violation in scan_source(name, text)]
