"""Sentence vectors for the answerer's scoring by meaning, and for the vector side's
best-sentence term (``ChunkSentences``).

Ingestion embeds every sentence the answerer may read (and each chunk's heading and title)
and stores the vectors in ``embedding_cache`` under the embedder's model key, keyed by the
SHA-256 of the text. A call looks its passages' sentences up here: in this process's LRU
first, then in one statement, and embeds on the spot only the few still missing (a KB
indexed before sentence vectors existed, a heading changed by hand), within a budget; the
rest are scored on their words.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncEngine

from app.answering.extractive import passage_sentences
from app.db.engine import raw_connection
from app.ingestion.chunking import embed_text
from app.query import repository as sql
from app.query.kb_vectors import decode_vectors, to_unit_rows

Vector = npt.NDArray[np.float32]
_K = TypeVar("_K")

# How much a sentence's vector read inside its chunk counts beside its own (docs/BENCHMARKS.md,
# thirty-sixth session: 0.5 to 4 measured on callers-dev and squad-dev; 2 to 4 alike).
IN_CHUNK_WEIGHT = 2.0

# Sentences embedded during a call when neither the LRU nor the database has them (about
# 1-3 ms each), and the longest the call waits for them.
_ON_THE_SPOT = 12
_ON_THE_SPOT_S = 0.15


@runtime_checkable
class SentenceEncoder(Protocol):
    """An embedder that can embed short texts in the calling thread (the offline default)."""

    @property
    def model_key(self) -> str: ...

    def encode_many(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@runtime_checkable
class ContextEncoder(SentenceEncoder, Protocol):
    """A sentence encoder that can also read a chunk's sentences inside the chunk, in the pass
    that embeds the chunk (``MiniLMEmbedder.embed_in_context``)."""

    async def embed_in_context(
        self, texts: Sequence[str], parts: Sequence[Sequence[str]]
    ) -> tuple[list[list[float]], list[list[Vector | None]]]: ...


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def in_chunk_key(model_key: str) -> str:
    """The embedding_cache key of sentence vectors read inside their chunk."""
    return f"{model_key}|in-chunk"


def in_chunk_hash(chunk_hash: bytes, sentence: str) -> bytes:
    """A sentence read inside one chunk (``chunk_hash``: the text_hash of its embed text)."""
    return hashlib.sha256(chunk_hash + sentence.encode()).digest()


class SentenceVectors:
    """Vectors of sentences by text, for one embedder; an LRU over embedding_cache.

    A sentence the answerer reads in a passage is scored by its own vector plus its vector
    read inside that chunk (``IN_CHUNK_WEIGHT``), at unit length: "It costs $350" alone says
    nothing of whitening; read in its chunk it does, and alone it keeps what it says itself.
    Measured on the sentences that answer callers-dev's, callers-fresh's and
    callers-holdout's questions, the sum ranks them first more often than either vector does
    (docs/BENCHMARKS.md, thirty-sixth session). A chunk indexed before in-chunk vectors (or
    under a title changed since) has none: its sentences are scored by their own vectors."""

    def __init__(self, encoder: SentenceEncoder, size: int = 50_000) -> None:
        self.encoder = encoder
        self.size = size
        self._items: OrderedDict[str, Vector] = OrderedDict()
        self._in_chunk: OrderedDict[bytes, Vector] = OrderedDict()
        self._in_chunk_key = in_chunk_key(encoder.model_key)

    async def for_passages(
        self, engine: AsyncEngine, passages: Sequence[tuple[str | None, str | None, str]]
    ) -> dict[str, Vector]:
        """The vectors the answerer reads for ``passages`` (title, heading, text each): every
        sentence's, heading's and title's; a sentence in two passages is read in the first."""
        texts: list[str] = []
        read_in: list[tuple[str, bytes]] = []
        for title, section, text in passages:
            sentences = passage_sentences(text)
            texts += sentences
            texts += (t for t in (section, title) if t)
            chunk = text_hash(embed_text(title, section, text))
            read_in += ((s, in_chunk_hash(chunk, s)) for s in sentences)
        own, in_chunk = await self._read(engine, texts, [h for _, h in read_in])
        vectors = dict(own)
        mixed: set[str] = set()
        for sentence, key in read_in:
            if sentence in mixed or key not in in_chunk or sentence not in own:
                continue
            mixed.add(sentence)
            total = own[sentence] + IN_CHUNK_WEIGHT * in_chunk[key]
            vectors[sentence] = (total / max(float(np.linalg.norm(total)), 1e-12)).astype(np.float32)
        return vectors

    async def _read(
        self, engine: AsyncEngine, texts: Iterable[str], in_chunk: Sequence[bytes]
    ) -> tuple[dict[str, Vector], dict[bytes, Vector]]:
        """Own vectors of ``texts`` (a few missing ones embedded on the spot) and the stored
        in-chunk vectors among ``in_chunk``; what is absent is scored without."""
        found: dict[str, Vector] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            vector = self._items.get(text)
            if vector is None:
                missing.append(text)
            else:
                self._items.move_to_end(text)
                found[text] = vector
        found_in: dict[bytes, Vector] = {}
        missing_in: list[bytes] = []
        for key in dict.fromkeys(in_chunk):
            vector = self._in_chunk.get(key)
            if vector is None:
                missing_in.append(key)
            else:
                self._in_chunk.move_to_end(key)
                found_in[key] = vector
        if not missing and not missing_in:
            return found, found_in
        by_hash = {text_hash(t): t for t in missing}
        async with raw_connection(engine) as conn:
            rows = await conn.fetch(
                sql.ANSWER_VECTORS_SQL, self.encoder.model_key, list(by_hash), self._in_chunk_key, missing_in
            )
        if rows:
            matrix = decode_vectors([row["v"] for row in rows])
            for row, vector in zip(rows, matrix, strict=True):
                key = bytes(row["text_hash"])
                if row["own"]:
                    text = by_hash[key]
                    found[text] = self._put(text, vector)
                else:
                    found_in[key] = _put(self._in_chunk, key, vector, self.size)
        still = [t for t in missing if t not in found][:_ON_THE_SPOT]
        if still:
            try:
                async with asyncio.timeout(_ON_THE_SPOT_S):
                    vectors = await asyncio.to_thread(self.encoder.encode_many, still)
            except TimeoutError:
                return found, found_in  # the thread finishes in the background; scored on words
            for text, vector in zip(still, vectors, strict=True):
                found[text] = self._put(text, vector)
        return found, found_in

    def _put(self, text: str, vector: Vector) -> Vector:
        return _put(self._items, text, vector, self.size)


def _put(items: OrderedDict[_K, Vector], key: _K, vector: Vector, size: int) -> Vector:
    items[key] = vector
    if len(items) > size:
        items.popitem(last=False)
    return vector


class ChunkSentences:
    """Each chunk's stored sentence vectors (unit rows), by chunk id, for the vector side's
    best-sentence term (retrieval.py): a chunk of several topics is found by the one sentence
    that answers, where its single vector averages them all.

    Only vectors stored at ingestion count, never ones embedded during a call: every process
    then ranks a chunk alike, in memory or in SQL. A chunk none of whose sentences are stored
    (a KB indexed before sentence vectors, another embedder's) is ranked on its own vector. A
    chunk's text never changes under its id (a re-index writes new rows), so an entry stays
    true while it is held; ``size`` chunks are held (about 8 KB each at 384 dimensions)."""

    def __init__(self, model_key: str, size: int = 5_000) -> None:
        self.model_key = model_key
        self.size = size
        self._items: OrderedDict[int, Vector | None] = OrderedDict()

    async def best(
        self,
        query: Vector,
        chunks: Sequence[tuple[int, str]],
        *,
        conn: Any = None,
        engine: AsyncEngine | None = None,
    ) -> list[float | None]:
        """The cosine of each chunk's closest sentence to the unit-length ``query`` (None for a
        chunk without stored sentence vectors); chunks not held yet are read on ``conn`` (else
        a connection of ``engine``), in one statement."""
        matrices: dict[int, Vector | None] = {}
        missing: list[tuple[int, str]] = []
        for chunk_id, text in chunks:
            if chunk_id in self._items:
                self._items.move_to_end(chunk_id)
                matrices[chunk_id] = self._items[chunk_id]
            else:
                missing.append((chunk_id, text))
        if missing:
            matrices.update(await self._load(missing, conn, engine))
        held = [m for chunk_id, _ in chunks if (m := matrices[chunk_id]) is not None]
        if not held:
            return [None] * len(chunks)
        # One product over all their sentences, then each chunk's maximum: a quarter of the
        # time of a product per chunk (25 against 98 us for 30 chunks). einsum, not @: no
        # BLAS threads (see KBVectors.similarities).
        cosines = np.einsum("ij,j->i", np.concatenate(held), query)
        starts = np.cumsum([0, *(len(m) for m in held[:-1])])
        best = iter(np.maximum.reduceat(cosines, starts).tolist())
        return [None if matrices[chunk_id] is None else next(best) for chunk_id, _ in chunks]

    async def _load(
        self, chunks: Sequence[tuple[int, str]], conn: Any, engine: AsyncEngine | None
    ) -> dict[int, Vector | None]:
        sentences = {chunk_id: [text_hash(t) for t in passage_sentences(text)] for chunk_id, text in chunks}
        hashes = list({h for of_chunk in sentences.values() for h in of_chunk})
        if conn is not None:
            rows = await conn.fetch(sql.SENTENCE_VECTORS_SQL, self.model_key, hashes)
        else:
            assert engine is not None, "ChunkSentences.best needs a connection or an engine"
            async with raw_connection(engine) as own:
                rows = await own.fetch(sql.SENTENCE_VECTORS_SQL, self.model_key, hashes)
        by_hash: dict[bytes, Vector] = {}
        if rows:
            matrix = decode_vectors([row["v"] for row in rows])
            to_unit_rows(matrix)
            by_hash = {bytes(row["text_hash"]): vector for row, vector in zip(rows, matrix, strict=True)}
        loaded: dict[int, Vector | None] = {}
        for chunk_id, of_chunk in sentences.items():
            found = [by_hash[h] for h in of_chunk if h in by_hash]
            loaded[chunk_id] = self._items[chunk_id] = np.stack(found) if found else None
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        return loaded
