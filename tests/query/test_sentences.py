"""Each chunk's stored sentence vectors for the vector side's best-sentence term
(app/query/sentences.py: ChunkSentences)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.db.engine import raw_connection
from app.ingestion.repository import CACHE_PUT_SQL
from app.query.sentences import ChunkSentences, text_hash

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
