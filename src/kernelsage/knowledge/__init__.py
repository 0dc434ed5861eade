"""Cold-start knowledge: a short pack per backend (quick reference, debugging guide, worked example),
stored as ordinary memory items so they earn utility and can be consolidated like any other."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import Memory

_SECTION = re.compile(r"^## +(.+)$", re.MULTILINE)
_CODE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def split_sections(markdown: str, source: str) -> list[NewItem]:
    """One knowledge item per `## ` section: its prose is the retrieval text, its first code block
    the minimal example. A file without sections becomes one item."""
    title_match = re.search(r"^# +(.+)$", markdown, re.MULTILINE)
    title = title_match.group(1).strip() if title_match else source
    starts = list(_SECTION.finditer(markdown))
    chunks = [(m.group(1).strip(), markdown[m.end(): starts[n + 1].start() if n + 1 < len(starts) else None])
              for n, m in enumerate(starts)] or [(title, markdown)]
    items = []
    for heading, body in chunks:
        code = _CODE.search(body)
        prose = " ".join(_CODE.sub("", body).split())
        if not prose and not code:
            continue
        items.append(NewItem(
            text=f"{title}: {heading}. {prose}".strip(), code_example=code.group(1).strip() if code else None,
            kind="knowledge", evidence=f"knowledge pack {source}",
            metadata={"source": source, "section": heading},
        ))
    return items


def has_builtin_pack(backend: str) -> bool:
    return resources.files("kernelsage.knowledge").joinpath(backend).is_dir()


def builtin_pack(backend: str) -> list[tuple[str, str]]:
    """(file name, Markdown) of the pack shipped for a backend."""
    folder = resources.files("kernelsage.knowledge").joinpath(backend)
    if not has_builtin_pack(backend):
        raise ConfigurationError(f"no knowledge pack is shipped for backend {backend!r}; seed from a folder")
    return sorted((f.name, f.read_text(encoding="utf-8")) for f in folder.iterdir() if f.name.endswith(".md"))


def folder_pack(folder: Path) -> list[tuple[str, str]]:
    files = sorted(folder.glob("*.md")) if folder.is_dir() else []
    if not files:
        raise ConfigurationError(f"{folder}: no Markdown (.md) files to seed the memory from")
    return [(f.name, f.read_text(encoding="utf-8")) for f in files]


def pack_items(*, backend: str = "cpu", folder: Path | None = None) -> list[NewItem]:
    """The items of a knowledge pack: a folder's Markdown files, else the pack shipped for `backend`."""
    pack = folder_pack(folder) if folder is not None else builtin_pack(backend)
    return [item for name, text in pack for item in split_sections(text, name)]


def seed_knowledge(memory: Memory, *, backend: str = "cpu", folder: Path | None = None) -> list[int]:
    """Store a knowledge pack in a namespace that has none yet; returns the new ids ([] if present).

    The check and the insert happen under the namespace's lock, so concurrent seeders store it once.
    (A namespace opened with `seed=` gets its pack inside its creation instead: see MemoryStore.open.)
    """
    items = pack_items(backend=backend, folder=folder)
    if memory.count_items(kind="knowledge"):
        return []  # the common case, without embedding the pack
    return memory.add_items(items, unless_kind_present="knowledge")
