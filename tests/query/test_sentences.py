"""Stored sentence vectors (app/query/sentences.py): each chunk's, for the vector side's
best-sentence term (ChunkSentences), and the answerer's, each sentence read alone and inside
its chunk (SentenceVectors)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.db.engine import raw_connection
from app.ingestion.chunking import embed_text
from app.ingestion.repository import CACHE_PUT_SQL
from app.query.sentences import (
    IN_CHUNK_WEIGHT,
    ChunkSentences,
    SentenceVectors,
    in_chunk_hash,
    in_chunk_key,
    text_hash,
)

MODEL = "minilm:test:4"


async def store(engine: Any, vectors: dict[str, list[float]], model: str = MODEL) -> None:
    async with raw_connection(engine) as conn:
        await conn.execute(
            CACHE_PUT_SQL,
            model,
            [text_hash(t) for t in vectors],
            ["[" + ",".join(str(x) for x in v) + "]" for v in vectors.values()],
        )


async def test_a_chunk_scores_its_closest_stored_sentence_and_is_held(engine):
    await store(
        engine,
        {
            "We are open Monday to Friday.": [3.0, 0.0, 0.0, 0.0],  # not of unit length: made so
            "Parking is free behind the clinic.": [0.0, 1.0, 0.0, 0.0],
            "Whitening costs 350 dollars.": [0.6, 0.8, 0.0, 0.0],
        },
    )
    await store(engine, {"The entrance is step-free.": [0.0, 0.0, 1.0, 0.0]}, model="minilm:other:4")
    sentences = ChunkSentences(MODEL)
    query = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    chunks = [
        (1, "We are open Monday to Friday. Parking is free behind the clinic."),
        (2, "Parking is free behind the clinic. Whitening costs 350 dollars. A sentence never stored."),
        (3, "The entrance is step-free."),  # stored for another model only
    ]
    assert await sentences.best(query, chunks, engine=engine) == pytest.approx([1.0, 0.6, None])
    # Held: the store is not read again for them (nor would a change there matter: a chunk's
    # text never changes under its id).
    async with raw_connection(engine) as conn:
        await conn.execute("DELETE FROM embedding_cache WHERE model_key = $1", MODEL)
    other = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)
    assert await sentences.best(other, chunks, engine=engine) == pytest.approx([1.0, 1.0, None])


async def test_only_size_chunks_are_held(engine):
    await store(engine, {"Cash is fine.": [1.0, 0.0, 0.0, 0.0]})
    sentences = ChunkSentences(MODEL, size=2)
    query = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    chunks = [(i, "Cash is fine.") for i in range(10, 15)]
    async with raw_connection(engine) as conn:
        assert await sentences.best(query, chunks, conn=conn) == pytest.approx([1.0] * 5)
    assert len(sentences._items) == 2


class _Encoder:
    """Embeds nothing: every vector these tests read is stored."""

    model_key = MODEL

    def encode_many(self, texts):
        raise AssertionError(f"nothing should be embedded on the spot: {texts}")


async def test_a_sentence_is_read_with_its_vector_in_its_chunk(engine):
    own = {
        "Whitening costs 350 dollars.": [1.0, 0.0, 0.0, 0.0],
        "Parking is free.": [0.0, 1.0, 0.0, 0.0],
        "Prices": [0.0, 0.0, 1.0, 0.0],
        "Clinic FAQ": [0.0, 0.0, 0.0, 1.0],
    }
    await store(engine, own)
    first = "Whitening costs 350 dollars. Parking is free."
    second = "Parking is free."
    chunk = text_hash(embed_text("Clinic FAQ", "Prices", first))
    read_in = {
        in_chunk_hash(chunk, "Whitening costs 350 dollars."): [0.0, 0.0, 0.6, 0.8],
        in_chunk_hash(chunk, "Parking is free."): [0.0, 0.0, 0.0, 1.0],
        # The same sentence in the second passage: a sentence is read in the first holding it.
        in_chunk_hash(text_hash(embed_text("Clinic FAQ", None, second)), "Parking is free."): [1.0, 0, 0, 0],
    }
    async with raw_connection(engine) as conn:
        await conn.execute(
            CACHE_PUT_SQL,
            in_chunk_key(MODEL),
            list(read_in),
            ["[" + ",".join(str(x) for x in v) + "]" for v in read_in.values()],
        )
    vectors = SentenceVectors(_Encoder()).for_passages(
        engine, [("Clinic FAQ", "Prices", first), ("Clinic FAQ", None, second)]
    )
    got = {text: vector.tolist() for text, vector in (await vectors).items()}
    w = IN_CHUNK_WEIGHT

    def unit(v: list[float]) -> list[float]:
        return (np.array(v) / np.linalg.norm(v)).tolist()

    assert got == {
        "Whitening costs 350 dollars.": pytest.approx(unit([1.0, 0.0, 0.6 * w, 0.8 * w]), abs=1e-6),
        "Parking is free.": pytest.approx(unit([0.0, 1.0, 0.0, w]), abs=1e-6),
        "Prices": [0.0, 0.0, 1.0, 0.0],  # headings and titles are read alone
        "Clinic FAQ": [0.0, 0.0, 0.0, 1.0],
    }


async def test_a_chunk_without_in_chunk_vectors_is_read_by_its_sentences_alone(engine):
    await store(engine, {"Cash is fine.": [0.6, 0.8, 0.0, 0.0]})
    vectors = await SentenceVectors(_Encoder()).for_passages(engine, [(None, None, "Cash is fine.")])
    assert {t: v.tolist() for t, v in vectors.items()} == {
        "Cash is fine.": pytest.approx([0.6, 0.8, 0.0, 0.0])
    }
