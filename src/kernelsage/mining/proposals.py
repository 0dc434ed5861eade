"""Asking the model for rewinds of a known-good kernel, and reading its answer: each variant removes one named
optimization, with one sentence on what that optimization does and the variant's full source."""

from __future__ import annotations

import re
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from kernelsage.mining.sources import KnownKernel, source_sha256
from kernelsage.tasks.model import Task

_HEADING = re.compile(r"^#{2,3} *Optimization: *(?P<name>.+?) *$", re.MULTILINE)
_FILE_BLOCK = re.compile(r"^ {0,3}```[^\n`]*\bfile=(?P<name>[^\s`]+)[^\n]*\n(?P<body>.*?)^ {0,3}```[ \t]*$",
                         re.MULTILINE | re.DOTALL)
MAX_NAME = 80  # characters of an optimization's name kept (it becomes part of a memory item's text)
MAX_SENTENCE = 400

SYSTEM = ("You are a performance engineer. You take a correct, optimized kernel apart: each variant you write "
          "removes exactly ONE optimization and keeps the kernel correct, so that measuring it shows what that "
          "optimization is worth.")

VARIANT_FORMAT = """\
Answer format (strict), one section per variant:
## Optimization: <the optimization's short name, e.g. OpenMP parallel loop>
<one sentence: what this optimization does and when it pays>
```cpp file=NAME
...the variant's complete file, with only that optimization removed...
```
Give every file of the kernel ({files}) in each section. Do not put triple backticks inside a file."""


@dataclass(frozen=True)
class Variant:
    """The known-good kernel with one named optimization removed."""

    optimization: str
    what: str  # one sentence: what the optimization does and when it pays
    files: dict[str, str]

    @property
    def sha256(self) -> str:
        return source_sha256(self.files)


def proposal_messages(task: Task, kernel: KnownKernel, count: int) -> list[BaseMessage]:
    """The prompt: the task, the kernel's files, and the request for `count` variants."""
    sources = "\n\n".join(f"```{_language(name)} file={name}\n{text.rstrip()}\n```" for name, text in kernel.files.items())
    ask = (f"Task {task.id} ({task.category}): {task.description.strip()}\n\n"
           f"This kernel is correct and fast:\n\n{sources}\n\n"
           f"Write up to {count} variants. Each removes ONE distinct optimization the kernel uses (parallel "
           "loops, vectorisation, blocking or tiling, loop order, hoisted work, fused passes, avoided copies ...) "
           "and changes nothing else; the variant must still compute the same result.\n\n"
           + VARIANT_FORMAT.format(files=", ".join(kernel.files)))
    return [SystemMessage(SYSTEM), HumanMessage(ask)]


def parse_variants(text: str, names: tuple[str, ...]) -> tuple[list[Variant], list[str]]:
    """The variants of an answer, and one problem line per section that could not be read (skipped)."""
    variants: list[Variant] = []
    problems: list[str] = []
    headings = list(_HEADING.finditer(text))
    if not headings:
        return [], ["the answer has no '## Optimization: NAME' section"]
    for index, heading in enumerate(headings):
        end = headings[index + 1].start() if index + 1 < len(headings) else len(text)
        section = text[heading.end():end]
        name = " ".join(heading["name"].split())[:MAX_NAME]
        files = {m["name"]: m["body"] for m in _FILE_BLOCK.finditer(section)}
        missing = [n for n in names if not files.get(n, "").strip()]
        if missing:
            problems.append(f"variant {name!r}: no complete block for {', '.join(missing)}")
            continue
        first_block = section.find("```")
        what = " ".join(section[:first_block].split())[:MAX_SENTENCE]
        if not what:
            problems.append(f"variant {name!r}: no sentence on what the optimization does")
            continue
        variants.append(Variant(name, what, {n: files[n] for n in names}))
    return variants, problems


def render_variants(variants: list[Variant]) -> str:
    """An answer in the format above (for the scripted test double and the bench); the inverse of parsing."""
    sections = []
    for variant in variants:
        blocks = "\n".join(f"```{_language(name)} file={name}\n{text.rstrip()}\n```" for name, text in variant.files.items())
        sections.append(f"## Optimization: {variant.optimization}\n{variant.what}\n{blocks}")
    return "\n\n".join(sections) + "\n"


def _language(name: str) -> str:
    return "python" if name.endswith(".py") else "cpp"
