"""Test doubles for the graph tests, labelled as such."""

from __future__ import annotations

from langchain_core.embeddings import DeterministicFakeEmbedding


def fake_embeddings() -> DeterministicFakeEmbedding:
    """Hash-seeded random vectors (a langchain_core test double): stable per text, no semantics."""
    return DeterministicFakeEmbedding(size=32)
