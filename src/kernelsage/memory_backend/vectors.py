"""Vectors as a namespace stores them: float32, of its dimension, finite and of a length cosine can divide by."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kernelsage.errors import EmbeddingDimensionError


def checked_vector(values: Sequence[float] | np.ndarray, dim: int, what: str) -> np.ndarray:
    """`values` as a float32 vector, checked against the namespace's dimension and for NaN and infinity."""
    array = np.asarray(values, dtype=np.float32)
    if array.ndim != 1 or array.shape[0] != dim:
        raise EmbeddingDimensionError(
            f"{what} has dimension {array.shape[-1] if array.ndim else 0}, but this namespace stores "
            f"{dim}-dimensional embeddings; use the embedding model the namespace was created with"
        )
    if not np.all(np.isfinite(array)):
        raise EmbeddingDimensionError(f"{what} contains NaN or infinite values")
    # Cosine similarity divides by the length: a zero vector (or one whose squared length pgvector's float32
    # arithmetic rounds to 0 or infinity) would give NaN relevance, which no commit can record.
    with np.errstate(over="ignore", under="ignore"):
        squared = float(np.dot(array, array))
    if not 0.0 < squared < np.inf:
        length = float(np.linalg.norm(array.astype(np.float64)))
        raise EmbeddingDimensionError(
            f"{what} has length {length:.3g}: cosine similarity needs a vector that is not zero "
            "(nor so short or long that its squared length leaves float32's range); check the embedding's source"
        )
    return array
