"""The cold-start knowledge pack: shipped for the CPU backend, or seeded from a user's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.knowledge import builtin_pack, seed_knowledge, split_sections
from kernelsage.memory_backend.store import MemoryStore
from tests.graph.fakes import fake_embeddings


def test_the_cpu_pack_has_a_reference_a_debugging_guide_and_a_worked_example() -> None:
    names = [name for name, _ in builtin_pack("cpu")]
    assert names == ["debugging_guide.md", "quick_reference.md", "worked_example.md"]
    with pytest.raises(ConfigurationError, match="no knowledge pack is shipped for backend 'tpu'"):
        builtin_pack("tpu")


def test_sections_become_items_with_their_first_code_block() -> None:
    text = "# Guide\n\n## Tiling\nBlock the loops.\n```cpp\nfor (...) {}\n```\n\n## Tails\nHandle the remainder.\n"
    items = split_sections(text, "guide.md")
    assert [i.text for i in items] == ["Guide: Tiling. Block the loops.", "Guide: Tails. Handle the remainder."]
    assert items[0].code_example == "for (...) {}" and items[1].code_example is None
    assert {i.kind for i in items} == {"knowledge"}


def test_seeding_stores_ordinary_items_once(store: MemoryStore, namespace: str) -> None:
    memory = store.open(namespace, embeddings=fake_embeddings())
    ids = seed_knowledge(memory)
    assert len(ids) >= 10
    item = memory.get_item(ids[0])
    assert item.kind == "knowledge" and item.state == "cold" and item.utility == 0.0
    assert seed_knowledge(memory) == []  # a namespace with knowledge is left alone
    assert memory.count_items(kind="knowledge") == len(ids)


def test_seeding_from_a_folder_of_markdown(store: MemoryStore, namespace: str, tmp_path: Path) -> None:
    (tmp_path / "npu.md").write_text("# Ascend C notes\n\n## Double buffering\nUse two queues to hide copies.\n")
    memory = store.open(namespace, embeddings=fake_embeddings())
    [item_id] = seed_knowledge(memory, folder=tmp_path)
    assert memory.get_item(item_id).text.startswith("Ascend C notes: Double buffering")
    with pytest.raises(ConfigurationError, match="no Markdown"):
        seed_knowledge(store.open(namespace + "x", embeddings=fake_embeddings()), folder=tmp_path / "empty")


def test_a_fresh_namespace_starts_from_the_backends_pack(episode, store: MemoryStore, namespace: str) -> None:
    from tests.graph.scripts import SLOW, candidate

    state, _ = episode([candidate(SLOW)], budget=1, top_k=2)
    shown = state["adoption"]
    assert len(shown) == 2  # two knowledge items were retrieved for the first draft
    memory = store.open(namespace, embeddings=fake_embeddings())
    assert memory.count_items(kind="knowledge") == memory.count_items() >= 10
    assert {memory.get_item(a["item_id"]).kind for a in shown} == {"knowledge"}
