"""Sentence vectors for the answerer's scoring by meaning, and for the vector side's
best-sentence term (``ChunkSentences``).

Ingestion embeds every sentence the answerer may read (and each chunk's heading and title)
and stores the vectors in ``embedding_cache`` under the embedder's model key, keyed by the
SHA-256 of the text; with the offline default it also stores each sentence as read inside
its chunk (``in_chunk_key``, keyed by chunk and sentence). A call looks its passages up
here: in this process's LRUs first, then in one statement, and embeds on the spot only the
few own vectors still missing (a KB indexed before sentence vectors existed, a heading
changed by hand), within a budget; the rest are scored on their words.
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

from app.answering.extractive import passage_sentences, texts_to_embed
from app.db.engine import raw_connection
from app.ingestion.chunking import embed_text
from app.query import repository as sql
from app.query.kb_vectors import decode_vectors, to_unit_rows

Vector = npt.NDArray[np.float32]
_K = TypeVar("_K")
_V = TypeVar("_V")

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


class RetrievedChunk(Protocol):
    """What the answerer reads of a retrieved chunk (a ``retrieval.Candidate``)."""

    @property
    def chunk_id(self) -> int: ...
    @property
    def title(self) -> str | None: ...
    @property
    def section(self) -> str | None: ...
    @property
    def text(self) -> str: ...


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def in_chunk_key(model_key: str) -> str:
    """The embedding_cache key of sentence vectors read inside their chunk."""
    return f"{model_key}|in-chunk"


def in_chunk_hash(chunk_hash: bytes, sentence: str) -> bytes:
    """A sentence read inside one chunk (``chunk_hash``: the text_hash of its embed text)."""
    return hashlib.sha256(chunk_hash + sentence.encode()).digest()


class SentenceVectors:
    """The vectors the answerer reads, for one embedder: LRUs over embedding_cache.

    A sentence the answerer reads in a passage is scored by its own vector plus its vector
    read inside that chunk (``IN_CHUNK_WEIGHT``), at unit length: "It costs $350" alone says
    nothing of whitening; read in its chunk it does, and alone it keeps what it says itself
    (docs/BENCHMARKS.md, thirty-sixth session). A chunk indexed before in-chunk vectors (or
    under a title changed since) has none: its sentences are scored by their own vectors.

    A passage's vectors are held by chunk id and title (a chunk's text and heading never
    change under its id; a re-index writes new rows), ``passages`` of them (about 9 KB each
    for the vectors read in the chunk), so that a call whose passages are held hashes and
    adds nothing: 9 us for five passages, against 180 us hashing and adding each time
    (docs/BENCHMARKS.md). Own vectors are held by text, ``size`` of them (1.5 KB each)."""

    def __init__(self, encoder: SentenceEncoder, size: int = 50_000, passages: int = 2_000) -> None:
        self.encoder = encoder
        self.size = size
        self.passages = passages
        self._items: OrderedDict[str, Vector] = OrderedDict()
        self._passages: OrderedDict[tuple[int, str | None], dict[str, Vector]] = OrderedDict()
        self._in_chunk_key = in_chunk_key(encoder.model_key)

    async def for_passages(
        self, engine: AsyncEngine, passages: Sequence[RetrievedChunk]
    ) -> dict[str, Vector]:
        """The vectors the answerer reads for ``passages``: every sentence's, heading's and
        title's; a sentence in two passages is read in the first."""
        held, missing = _take(self._passages, [(p.chunk_id, p.title) for p in passages])
        if missing:
            wanted = set(missing)
            fresh = [p for p in passages if (p.chunk_id, p.title) in wanted]
            held |= await self._read_passages(engine, fresh)
        vectors: dict[str, Vector] = {}
        for passage in passages:
            for text, vector in held[(passage.chunk_id, passage.title)].items():
                vectors.setdefault(text, vector)
        return vectors

    async def _read_passages(
        self, engine: AsyncEngine, passages: Sequence[RetrievedChunk]
    ) -> dict[tuple[int, str | None], dict[str, Vector]]:
        # Each passage's sentences, with the key of each as read in it, and its other texts.
        plans = []
        for p in passages:
            chunk = text_hash(embed_text(p.title, p.section, p.text))
            sentences = [(s, in_chunk_hash(chunk, s)) for s in passage_sentences(p.text)]
            plans.append((p, sentences, texts_to_embed(p.text, p.section, p.title)))
        own, in_chunk = await self._read(
            engine,
            [t for _, _, texts in plans for t in texts],
            [h for _, sentences, _ in plans for _, h in sentences],
        )
        read: dict[tuple[int, str | None], dict[str, Vector]] = {}
        for p, sentences, texts in plans:
            entry: dict[str, Vector] = {}
            for sentence, in_key in sentences:
                vector = own.get(sentence)
                inside = in_chunk.get(in_key)
                if vector is not None and inside is not None:
                    total = vector + IN_CHUNK_WEIGHT * inside
                    vector = (total / max(float(np.linalg.norm(total)), 1e-12)).astype(np.float32)
                if vector is not None:
                    entry.setdefault(sentence, vector)
            entry |= {t: own[t] for t in (p.section, p.title) if t and t in own}
            key = (p.chunk_id, p.title)
            read[key] = entry
            if all(t in own for t in texts):
                # Held only when whole: a text missing now (embedding it on the spot timed
                # out) is looked for again at the next call.
                _put(self._passages, key, entry, self.passages)
        return read

    async def _read(
        self, engine: AsyncEngine, texts: Iterable[str], in_chunk: Sequence[bytes]
    ) -> tuple[dict[str, Vector], dict[bytes, Vector]]:
        """Own vectors of ``texts`` (a few missing ones embedded on the spot) and the stored
        in-chunk vectors among ``in_chunk``, in one statement; what is absent is scored
        without."""
        found, missing = _take(self._items, texts)
        by_hash = {text_hash(t): t for t in missing}
        found_in: dict[bytes, Vector] = {}
        if not missing and not in_chunk:
            return found, found_in
        async with raw_connection(engine) as conn:
            rows = await conn.fetch(
                sql.ANSWER_VECTORS_SQL,
                self.encoder.model_key,
                list(by_hash),
                self._in_chunk_key,
                list(in_chunk),
            )
        if rows:
            matrix = decode_vectors([row["v"] for row in rows])
            for row, vector in zip(rows, matrix, strict=True):
                key = bytes(row["text_hash"])
                if row["own"]:
                    text = by_hash[key]
                    found[text] = _put(self._items, text, vector, self.size)
                else:
                    found_in[key] = vector
        still = [t for t in missing if t not in found][:_ON_THE_SPOT]
        if still:
            try:
                async with asyncio.timeout(_ON_THE_SPOT_S):
                    vectors = await asyncio.to_thread(self.encoder.encode_many, still)
            except TimeoutError:
                return found, found_in  # the thread finishes in the background; scored on words
            for text, vector in zip(still, vectors, strict=True):
                found[text] = _put(self._items, text, vector, self.size)
        return found, found_in


def _take(items: OrderedDict[_K, _V], keys: Iterable[_K]) -> tuple[dict[_K, _V], list[_K]]:
    """The values held for ``keys`` (each now the most recently used) and the keys not held."""
    found: dict[_K, _V] = {}
    missing: list[_K] = []
    for key in dict.fromkeys(keys):
        value = items.get(key)
        if value is None:
            missing.append(key)
        else:
            items.move_to_end(key)
            found[key] = value
    return found, missing


def _put(items: OrderedDict[_K, _V], key: _K, value: _V, size: int) -> _V:
    items[key] = value
    if len(items) > size:
        items.popitem(last=False)
    return value


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
