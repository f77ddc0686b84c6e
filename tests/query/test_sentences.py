"""Stored sentence vectors (app/query/sentences.py): each chunk's, for the vector side's
best-sentence term (ChunkSentences), and the answerer's, each sentence read alone and inside
its chunk (SentenceVectors)."""

from __future__ import annotations

import time
from dataclasses import dataclass
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


@dataclass(frozen=True)
class P:
    chunk_id: int
    title: str | None
    section: str | None
    text: str


class _Encoder:
    """Embeds nothing: every vector these tests read is stored."""

    model_key = MODEL

    def encode_many(self, texts):
        raise AssertionError(f"nothing should be embedded on the spot: {texts}")


def unit(v: list[float]) -> list[float]:
    return (np.array(v) / np.linalg.norm(v)).tolist()


def listed(vectors: dict[str, np.ndarray]) -> dict[str, list[float]]:
    return {text: vector.tolist() for text, vector in vectors.items()}


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
    sentences = SentenceVectors(_Encoder())
    passages = [P(1, "Clinic FAQ", "Prices", first), P(2, "Clinic FAQ", None, second)]
    got = listed(await sentences.for_passages(engine, passages))
    w = IN_CHUNK_WEIGHT
    assert got == {
        "Whitening costs 350 dollars.": pytest.approx(unit([1.0, 0.0, 0.6 * w, 0.8 * w]), abs=1e-6),
        "Parking is free.": pytest.approx(unit([0.0, 1.0, 0.0, w]), abs=1e-6),
        "Prices": [0.0, 0.0, 1.0, 0.0],  # headings and titles are read alone
        "Clinic FAQ": [0.0, 0.0, 0.0, 1.0],
    }
    # Held: read again without the store (a chunk's text never changes under its id).
    async with raw_connection(engine) as conn:
        await conn.execute("DELETE FROM embedding_cache")
    assert listed(await sentences.for_passages(engine, passages)) == got
    # The second passage alone: its own reading of the sentence.
    assert listed(await sentences.for_passages(engine, passages[1:])) == {
        "Parking is free.": pytest.approx(unit([w, 1.0, 0.0, 0.0]), abs=1e-6),
        "Clinic FAQ": [0.0, 0.0, 0.0, 1.0],
    }


async def test_a_chunk_without_in_chunk_vectors_is_read_by_its_sentences_alone(engine):
    await store(engine, {"Cash is fine.": [0.6, 0.8, 0.0, 0.0]})
    vectors = await SentenceVectors(_Encoder()).for_passages(engine, [P(7, None, None, "Cash is fine.")])
    assert listed(vectors) == {"Cash is fine.": pytest.approx([0.6, 0.8, 0.0, 0.0])}


class _Slow(_Encoder):
    def encode_many(self, texts):
        time.sleep(0.3)  # longer than a call waits for texts embedded on the spot
        return np.full((len(texts), 4), 0.5, dtype=np.float32)


async def test_a_passage_read_without_all_its_texts_is_read_again(engine):
    await store(engine, {"Cash is fine.": [0.6, 0.8, 0.0, 0.0]})
    sentences = SentenceVectors(_Slow())
    passage = P(7, "Payments", None, "Cash is fine.")
    assert list(await sentences.for_passages(engine, [passage])) == ["Cash is fine."]  # no title in time
    await store(engine, {"Payments": [0.0, 0.0, 1.0, 0.0]})
    assert listed(await sentences.for_passages(engine, [passage])) == {
        "Cash is fine.": pytest.approx([0.6, 0.8, 0.0, 0.0]),
        "Payments": [0.0, 0.0, 1.0, 0.0],
    }
    # Renamed: read again under its new title (embedded on the spot, too late here).
    assert list(await sentences.for_passages(engine, [P(7, "Paying", None, "Cash is fine.")])) == [
        "Cash is fine."
    ]


async def test_only_passages_passages_are_held(engine):
    await store(engine, {"Cash is fine.": [0.6, 0.8, 0.0, 0.0]})
    sentences = SentenceVectors(_Encoder(), passages=2)
    await sentences.for_passages(engine, [P(i, None, None, "Cash is fine.") for i in range(5)])
    assert list(sentences._passages) == [(3, None), (4, None)]
