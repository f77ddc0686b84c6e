"""Small knowledge bases held in the process's memory, for exact vector search without a
database round trip.

The exact scan of an agent's KB was the largest part of query_knowledge's own time: 1.6-2.2
ms of PostgreSQL per call for 1,000 chunks at 512 dimensions, read page by page through the
buffer manager (docs/BENCHMARKS.md). The same comparison over a float32 matrix in numpy takes
about 0.06 ms, and the chunks' text is at hand, so after the agent's context statement
(which brings BM25's candidates) nothing more is asked of the database. PostgreSQL stays the
store and the source of truth; this is a read-through copy of what it holds, and it moves
the exact scan's CPU from the shared database to the service processes, which scale out.

Correctness rests on the KBs' content version. Triggers in the database (migration 0009)
bump ``knowledge_bases.content_version`` in the transaction of every change to a KB's chunks,
its documents' titles or its language, whoever writes it; the context statement reads the
versions of the agent's KBs on every call, and a copy is used only when its version is the
one just read.
A copy is loaded in one statement that reads the version with the chunks, so it is exactly
the chunks of that version. A KB not held, or held at another version, is searched in
PostgreSQL as before while its copy is (re)loaded in the background; no call waits for a
load.

A copy also holds the KB's BM25 postings (chunk_terms, read in the same snapshot), so that
BM25 too is ranked in the process (``retrieval.rank_text``): aggregating a question's postings
was most of the context statement's time at 1,000 chunks a KB (docs/BENCHMARKS.md).

Memory is bounded (``QUERY__VECTOR_CACHE_MB`` per process, least recently used KBs go
first, but never one used within ``keep_used_s``: when the KBs in use do not fit, the
newcomer is searched in PostgreSQL instead of every KB being loaded again and again): at 512
dimensions a 1,000-chunk KB of 500-token chunks takes about 4 MB (vectors and text), at 1,536
about 8 MB, and its BM25 postings about 1.8 MB more (8 bytes a posting, some 150 a chunk of
prose, and its distinct terms); a load needs about twice the KB's size more while it runs (three
times for the postings). Only KBs of agents small enough for exact search are held; larger
agents use the HNSW index in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
from app.observability.metrics import VECTOR_CACHE_BYTES, VECTOR_CACHE_EVICTIONS, VECTOR_CACHE_LOADS
from app.query import repository as sql

log = logging.getLogger(__name__)

# Per chunk beyond its vector and text: the id, list slots, the section and page objects.
_ROW_OVERHEAD_BYTES = 120
# A document id of the postings' list: the UUID object and its slot.
_DOCUMENT_BYTES = 100
# einsum holds the GIL: a copy larger than this many values (20,000 x 1,536 took 4-8 ms) is
# compared in blocks of about this size, the event loop answering other calls in between.
_BLOCK_VALUES = 1 << 20
# Bookkeeping per KB id ever asked about is pruned past this many entries.
_MAX_TRACKED = 10_000

# A KB's content stamp: its content version and when it last changed.
Stamp = tuple[int, dt.datetime]


def _hidden_documents(
    documents: Sequence[uuid.UUID | None], hidden: frozenset[uuid.UUID]
) -> npt.NDArray[np.bool_] | None:
    """True for each of ``documents`` that is ``hidden``; None when none is. Indexed by a
    copy's document numbers, it masks rows or postings with one lookup each (np.isin on
    the UUIDs would sort)."""
    hide = [n for n, doc in enumerate(documents) if doc in hidden] if hidden else []
    if not hide:
        return None
    of_hidden = np.zeros(len(documents), dtype=np.bool_)
    of_hidden[hide] = True
    return of_hidden


@dataclass(frozen=True, slots=True)
class Postings:
    """A KB's BM25 postings (chunk_terms at the copy's version), for ranking in the process
    (retrieval.rank_text). The postings of a term (``span``: ``(a, b)``) are ``slots[a:b]``
    (each a chunk: its id ``ids[slot]``, length ``dl[slot]``, document
    ``documents[document_of[slot]]``) and ``tf[a:b]``. Every chunk of the KB is here, of any
    embedding model, as the SQL ranking counts them.

    The terms are not a dict: a prose KB of 1,000 chunks has some 20,000 distinct lexemes,
    about 4 MB as Python strings, tuples and dict slots, as much as its vectors and text. They
    are held as their sorted str hashes (this process's, as the lookups are) with their text
    packed in one bytes object to tell a hash collision apart: about 16 bytes and the
    lexeme's own per term."""

    language: str
    hashes: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int32]
    text: bytes
    offsets: npt.NDArray[np.int32]
    slots: npt.NDArray[np.int32]
    tf: npt.NDArray[np.int32]
    ids: npt.NDArray[np.int64]
    dl: npt.NDArray[np.float64]
    documents: list[uuid.UUID | None]
    document_of: npt.NDArray[np.int32]

    @classmethod
    def from_rows(cls, language: str, rows: Sequence[Any], chunks: Sequence[Any]) -> Postings:
        """From KB_POSTINGS_SQL's rows (a term each) and the KB's chunks with their documents
        (KB_CHUNK_DOCUMENTS_SQL)."""
        rows = sorted(rows, key=lambda r: hash(r["term"]))
        encoded = [r["term"].encode() for r in rows]
        chunk_ids = np.frombuffer(b"".join(r["ids"] for r in rows), dtype=">i8").astype(np.int64)
        ids, slots = np.unique(chunk_ids, return_inverse=True)
        dl = np.zeros(len(ids), dtype=np.float64)
        dl[slots] = np.frombuffer(b"".join(r["dls"] for r in rows), dtype=">i4")
        # A posting whose chunk is gone (written with the triggers off, as a restore may) has
        # no document: ranked as in SQL, never hidden, and dropped for want of a row.
        document_by_chunk = {r["id"]: r["document_id"] for r in chunks}
        numbers: dict[uuid.UUID | None, int] = {}
        document_of = np.fromiter(
            (numbers.setdefault(document_by_chunk.get(i), len(numbers)) for i in ids.tolist()),
            dtype=np.int32,
            count=len(ids),
        )
        return cls(
            language=language,
            hashes=np.fromiter((hash(r["term"]) for r in rows), dtype=np.int64, count=len(rows)),
            starts=np.cumsum([0, *(r["n"] for r in rows)], dtype=np.int32),
            text=b"".join(encoded),
            offsets=np.cumsum([0, *map(len, encoded)], dtype=np.int32),
            slots=slots.astype(np.int32),
            tf=np.frombuffer(b"".join(r["tfs"] for r in rows), dtype=">i4").astype(np.int32),
            ids=ids,
            dl=dl,
            documents=list(numbers),
            document_of=document_of,
        )

    def span(self, term: str) -> tuple[int, int] | None:
        """Where the postings of ``term`` are, or None when no chunk holds it."""
        key = hash(term)
        at = int(np.searchsorted(self.hashes, key))
        encoded = term.encode()
        while at < len(self.hashes) and self.hashes[at] == key:
            if self.text[self.offsets[at] : self.offsets[at + 1]] == encoded:
                return int(self.starts[at]), int(self.starts[at + 1])
            at += 1
        return None

    @property
    def nbytes(self) -> int:
        return (
            sum(
                a.nbytes
                for a in (self.hashes, self.starts, self.offsets, self.slots, self.tf, self.ids, self.dl)
            )
            + len(self.text)
            + self.document_of.nbytes
            + len(self.documents) * _DOCUMENT_BYTES
        )

    def hidden_slots(self, hidden: frozenset[uuid.UUID]) -> npt.NDArray[np.bool_] | None:
        """True for the chunks of a ``hidden`` document; None when there is none."""
        of_hidden = _hidden_documents(self.documents, hidden)
        return None if of_hidden is None else of_hidden[self.document_of]


@dataclass(frozen=True, slots=True)
class KBVectors:
    """One KB's chunks of one embedding model, at one content stamp. Row i of ``matrix``
    (unit length, float32) is chunk ``ids[i]``; a chunk whose stored vector has no length
    keeps a zero row and ``zero[i]`` set, and ranks last, as pgvector ranks its NaN
    distance."""

    kb_id: uuid.UUID
    stamp: Stamp
    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    zero: npt.NDArray[np.bool_] | None
    position: dict[int, int]
    document_ids: list[uuid.UUID]
    titles: list[str]
    sections: list[str | None]
    pages: list[int | None]
    texts: list[str]
    nbytes: int
    # Row i is a chunk of document ``documents[document_rows[i]]``: hiding a document from a
    # call (migration 0020) is a mask over rows.
    documents: list[uuid.UUID] = field(default_factory=list)
    document_rows: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    loaded_at: float = field(default_factory=time.monotonic)
    # Its BM25 postings (None: ranked in PostgreSQL).
    postings: Postings | None = None

    @classmethod
    def from_rows(cls, kb_id: uuid.UUID, rows: Sequence[Any], postings: Postings | None = None) -> KBVectors:
        """From KB_VECTORS_SQL's rows (a KB without chunks has one row, its stamp)."""
        stamp = (int(rows[0]["version"]), rows[0]["changed"])
        rows = [r for r in rows if r["id"] is not None]
        ids = np.fromiter((r["id"] for r in rows), dtype=np.int64, count=len(rows))
        if rows:
            try:
                matrix = decode_vectors([r["v"] for r in rows])
            except ValueError:
                raise ValueError(f"KB {kb_id}: chunks of one model with different dimensions") from None
            zero = to_unit_rows(matrix)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
            zero = np.zeros(0, dtype=np.bool_)
        # One string object per document title, not one per chunk.
        titles_by_doc: dict[uuid.UUID, str] = {}
        titles = [titles_by_doc.setdefault(r["document_id"], r["title"]) for r in rows]
        documents = list(titles_by_doc)
        number = {doc: n for n, doc in enumerate(documents)}
        document_rows = np.fromiter((number[r["document_id"]] for r in rows), dtype=np.int32, count=len(rows))
        texts = [r["text"] for r in rows]
        nbytes = (
            matrix.nbytes
            + ids.nbytes
            + sum(sys.getsizeof(t) for t in texts)
            + sum(sys.getsizeof(t) for t in titles_by_doc.values())
            + len(rows) * _ROW_OVERHEAD_BYTES
            + (postings.nbytes if postings is not None else 0)
        )
        return cls(
            kb_id=kb_id,
            stamp=stamp,
            ids=ids,
            matrix=matrix,
            zero=zero if zero.any() else None,
            position={int(i): n for n, i in enumerate(ids.tolist())},
            document_ids=[r["document_id"] for r in rows],
            titles=titles,
            sections=[r["section"] for r in rows],
            pages=[r["page"] for r in rows],
            texts=texts,
            nbytes=nbytes,
            documents=documents,
            document_rows=document_rows,
            postings=postings,
        )

    async def similarities(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine similarity of every row to the unit-length ``query``; -inf for rows
        without length.

        einsum, not ``@``: ``@`` is OpenBLAS's sgemv, whose worker threads spin after each
        call; between paced calls they kept a whole core busy (measured: 57 ms of service
        CPU per call instead of 6 in query_bench's paced phase). einsum's own loop costs 45 us
        instead of 12 at 1,000 x 512, and no thread."""
        n, dim = self.matrix.shape
        sims: npt.NDArray[np.float32]
        if n * dim <= _BLOCK_VALUES:
            sims = np.einsum("ij,j->i", self.matrix, query)
        else:
            sims = np.empty(n, dtype=np.float32)
            step = max(1, _BLOCK_VALUES // dim)
            for start in range(0, n, step):
                sims[start : start + step] = np.einsum("ij,j->i", self.matrix[start : start + step], query)
                await asyncio.sleep(0)
        if self.zero is not None:
            sims[self.zero] = -np.inf
        return sims

    def shown_rows(self, hidden: frozenset[uuid.UUID]) -> npt.NDArray[np.intp] | None:
        """The rows not of a ``hidden`` document; None for all of them."""
        of_hidden = _hidden_documents(self.documents, hidden)
        return None if of_hidden is None else np.flatnonzero(~of_hidden[self.document_rows])

    def nearest(
        self, sims: npt.NDArray[np.float32], limit: int, shown: npt.NDArray[np.intp] | None = None
    ) -> list[tuple[float, int, int]]:
        """The ``limit`` rows most similar by ``sims`` as (similarity, chunk id, row), best
        first, ties by id: the order of VECTOR_EXACT's ``ORDER BY dist, id``; only rows among
        ``shown`` when given."""
        n = len(self.ids) if shown is None else len(shown)
        if n == 0:
            return []
        pool_sims = sims if shown is None else sims[shown]
        if n > limit:
            # Every row as close as the limit-th one, so ties at the cut are broken by id
            # as in SQL, not by argpartition's order.
            kth = np.argpartition(-pool_sims, limit - 1)[limit - 1]
            rows = np.flatnonzero(pool_sims >= pool_sims[kth])
        else:
            rows = np.arange(n)
        if shown is not None:
            rows = shown[rows]
        ranked = sorted(
            zip(sims[rows].tolist(), self.ids[rows].tolist(), rows.tolist(), strict=True), key=nearest_first
        )
        return ranked[:limit]


def _copy_of(kb_id: uuid.UUID, rows: Sequence[Any], terms: Sequence[Any], chunks: Sequence[Any]) -> KBVectors:
    return KBVectors.from_rows(kb_id, rows, Postings.from_rows(rows[0]["language"], terms, chunks))


def decode_vectors(wires: Sequence[bytes]) -> npt.NDArray[np.float32]:
    """Vectors as ``vector_send`` sends them (a 4-byte header with the dimensions, then
    big-endian float4s), one row each, in one pass; ValueError if their sizes differ."""
    dim = int.from_bytes(wires[0][:2], "big")
    size = 4 + 4 * dim
    if any(len(w) != size for w in wires):
        raise ValueError("vectors of different dimensions")
    wire = np.dtype([("header", "V4"), ("v", ">f4", (dim,))])
    matrix: npt.NDArray[np.float32] = np.frombuffer(b"".join(wires), dtype=wire)["v"].astype(np.float32)
    return matrix


def to_unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
    """Scales each row of ``matrix`` to unit length in place; returns which rows are zero
    (left as they are: they match nothing)."""
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    zero: npt.NDArray[np.bool_] = norms == 0
    matrix /= np.where(zero, 1.0, norms)[:, None].astype(np.float32)
    return zero


def nearest_first(item: tuple[Any, ...]) -> tuple[float, int]:
    """Sort key of (similarity, chunk id, ...) tuples: VECTOR_EXACT's ``ORDER BY dist, id``."""
    return (-item[0], item[1])


class KBVectorCache:
    """The KBs held in this process, least recently used first, within ``budget_bytes``."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        model_key: str,
        budget_bytes: int,
        reload_interval_s: float = 1.0,
        reload_factor: float = 10.0,
        max_age_s: float = 300.0,
        keep_used_s: float = 60.0,
    ) -> None:
        self.engine = engine
        self.model_key = model_key
        self.budget_bytes = budget_bytes
        # A KB being filled changes version with every document: it is reloaded at most every
        # reload_interval_s, and no sooner than reload_factor times its last load's duration
        # (a large KB under steady ingestion would otherwise be read whole every second), and
        # searched in PostgreSQL in between.
        self.reload_interval_s = reload_interval_s
        self.reload_factor = reload_factor
        self.max_age_s = max_age_s
        self.keep_used_s = keep_used_s
        self._entries: OrderedDict[uuid.UUID, KBVectors] = OrderedDict()
        self._used: dict[uuid.UUID, float] = {}
        self._bytes = 0
        self._loading: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._next_load: dict[uuid.UUID, float] = {}
        # KBs found too large for the whole budget, by the stamp they had: not loaded again
        # until they change.
        self._too_large: dict[uuid.UUID, Stamp] = {}
        # One load at a time per process: a cold start must not flood the database.
        self._load_slot = asyncio.Semaphore(1)
        self._closed = False
        self.loads = 0

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def held(self) -> dict[uuid.UUID, int]:
        """KB id -> content version of every KB held (tests, diagnostics)."""
        return {kb: e.stamp[0] for kb, e in self._entries.items()}

    def lookup(
        self,
        org_id: uuid.UUID,
        kb_ids: Sequence[uuid.UUID],
        versions: Sequence[int],
        changed: Sequence[dt.datetime],
    ) -> list[KBVectors] | None:
        """The copies of ``kb_ids`` at exactly these stamps, or None when any is missing;
        then every missing one is loaded in the background."""
        if not self.enabled:
            return None
        found: list[KBVectors] = []
        complete = True
        now = time.monotonic()
        for kb_id, version, at in zip(kb_ids, versions, changed, strict=True):
            stamp = (version, at)
            entry = self._entries.get(kb_id)
            if entry is not None and entry.stamp == stamp:
                self._entries.move_to_end(kb_id)
                self._used[kb_id] = now
                found.append(entry)
                if now - entry.loaded_at > self.max_age_s:
                    self._want(org_id, kb_id, stamp, now)  # refreshed behind the calls
            else:
                complete = False
                self._want(org_id, kb_id, stamp, now)
        return found if complete else None

    def _want(self, org_id: uuid.UUID, kb_id: uuid.UUID, stamp: Stamp, now: float) -> None:
        if self._closed or kb_id in self._loading or self._too_large.get(kb_id) == stamp:
            return
        if now < self._next_load.get(kb_id, 0.0):
            return
        if len(self._next_load) > _MAX_TRACKED:
            self._next_load = {k: t for k, t in self._next_load.items() if t > now}
        self._next_load[kb_id] = now + self.reload_interval_s
        task = asyncio.create_task(self._load(org_id, kb_id))
        self._loading[kb_id] = task
        task.add_done_callback(partial(self._loaded, kb_id))

    def _loaded(self, kb_id: uuid.UUID, _task: asyncio.Task[None]) -> None:
        self._loading.pop(kb_id, None)

    async def load(self, org_id: uuid.UUID, kb_id: uuid.UUID) -> KBVectors | None:
        """Read the KB's current chunks and hold them; None when the KB is gone, too large,
        or would push out a KB in use."""
        async with self._load_slot:
            started = time.monotonic()
            # One snapshot: the postings are those of the version the vectors are read at.
            async with (
                raw_connection(self.engine) as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                rows = await conn.fetch(sql.KB_VECTORS_SQL, kb_id, org_id, self.model_key)
                if rows:
                    terms = await conn.fetch(sql.KB_POSTINGS_SQL, kb_id)
                    chunks = await conn.fetch(sql.KB_CHUNK_DOCUMENTS_SQL, kb_id)
            if not rows:
                self._drop(kb_id)
                return None
            # Building a copy is Python over every row (tens of ms for a 20,000-chunk KB): in
            # a thread, so the event loop keeps answering calls meanwhile.
            entry = await asyncio.to_thread(_copy_of, kb_id, rows, terms, chunks)
            del rows, terms, chunks
            now = time.monotonic()
            self._next_load[kb_id] = max(
                self._next_load.get(kb_id, 0.0),
                started + max(self.reload_interval_s, self.reload_factor * (now - started)),
            )
        self.loads += 1
        self._drop(kb_id)
        if entry.nbytes > self.budget_bytes:
            if len(self._too_large) > _MAX_TRACKED:
                self._too_large.clear()
            self._too_large[kb_id] = entry.stamp
            VECTOR_CACHE_LOADS.labels("too_large").inc()
            log.info("KB %s (%d bytes) is larger than QUERY__VECTOR_CACHE_MB", kb_id, entry.nbytes)
            return None
        self._too_large.pop(kb_id, None)
        while self._bytes + entry.nbytes > self.budget_bytes:
            oldest = next(iter(self._entries))
            if now - self._used.get(oldest, 0.0) < self.keep_used_s:
                # Every KB held was used just now: this one is searched in PostgreSQL rather
                # than the KBs in use being loaded again and again in turn.
                self._next_load[kb_id] = now + self.keep_used_s
                VECTOR_CACHE_LOADS.labels("no_room").inc()
                return None
            self._drop(oldest)
            VECTOR_CACHE_EVICTIONS.inc()
        self._entries[kb_id] = entry
        self._used[kb_id] = now
        self._bytes += entry.nbytes
        VECTOR_CACHE_BYTES.set(self._bytes)
        VECTOR_CACHE_LOADS.labels("held").inc()
        return entry

    async def _load(self, org_id: uuid.UUID, kb_id: uuid.UUID) -> None:
        try:
            await self.load(org_id, kb_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The call that wanted it was already served from PostgreSQL; the next one after
            # reload_interval_s tries again.
            VECTOR_CACHE_LOADS.labels("failed").inc()
            log.warning("could not load KB %s into memory", kb_id, exc_info=True)

    def _drop(self, kb_id: uuid.UUID) -> None:
        entry = self._entries.pop(kb_id, None)
        self._used.pop(kb_id, None)
        if entry is not None:
            self._bytes -= entry.nbytes
            VECTOR_CACHE_BYTES.set(self._bytes)

    async def settle(self) -> None:
        """Wait for the loads under way (tests)."""
        while self._loading:
            await asyncio.gather(*list(self._loading.values()), return_exceptions=True)

    async def close(self) -> None:
        """Cancel the loads under way, and start none after this (at shutdown)."""
        self._closed = True
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
