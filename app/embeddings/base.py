"""The embedding provider contract shared by ingestion and the query path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

# pgvector's HNSW index cannot index vectors with more dimensions than this.
MAX_INDEXABLE_DIMENSIONS = 2000


class EmbeddingError(Exception):
    """An embedding provider failed.

    ``retryable`` tells the caller whether the same request may succeed later (rate limits,
    provider outages, timeouts) or will fail again until something is changed (bad key, bad
    model name, malformed response).
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable

    def __str__(self) -> str:
        return self.message


def embedder_family(model_key: str) -> str:
    """``lexical``, ``local`` or ``openai``: the provider part of a model key such as
    ``"lexical-v1:512"`` or ``"openai:text-embedding-3-small:1536"``."""
    return model_key.split(":", 1)[0].split("-", 1)[0]


class Embedder(Protocol):
    """Turns text into unit-length vectors of a fixed size.

    Every vector returned is L2-normalised and has exactly ``dimensions`` floats, so cosine
    similarity is a dot product and never divides by zero.
    """

    @property
    def model_key(self) -> str:
        """Identifies model and dimensions, e.g. ``"lexical-v1:512"``; stored with every chunk so
        vectors from different models are never compared."""
        ...

    @property
    def dimensions(self) -> int:
        """Length of every returned vector."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed many texts for ingestion, in input order; batches and retries as needed."""
        ...

    async def embed_query(self, text: str, *, timeout: float) -> list[float]:
        """Embed one query on the hot path, giving up with ``EmbeddingError`` after ``timeout`` s."""
        ...


def normalise_rows(matrix: npt.ArrayLike, *, source: str) -> list[list[float]]:
    """L2-normalise each row; a zero or non-finite row is a provider fault, not a valid vector."""
    values = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(values, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0.0):
        raise EmbeddingError(f"{source} returned a zero or non-finite vector", retryable=False)
    result: list[list[float]] = (values / norms).tolist()
    return result
