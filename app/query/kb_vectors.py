"""Small knowledge bases held in the process's memory, for exact vector search without a
database round trip.

The exact scan of an agent's KB was the largest part of query_knowledge's own time: 1.6-2.2
ms of PostgreSQL per call for 1,000 chunks at 512 dimensions, read page by page through the
buffer manager (docs/BENCHMARKS.md). The same comparison over a float32 matrix in numpy takes
about 0.06 ms, and the chunks' text is at hand, so after the agent's context statement
(which brings BM25's candidates) nothing more is asked of the database. PostgreSQL stays the
store and the source of truth; this is a read-through copy of what it holds, and it moves
the exact scan's CPU from the shared database to the service processes, which scale out.

Correctness rests on the KBs' content version. Every change to a KB's chunks or its
documents' titles bumps ``knowledge_bases.content_version`` in the same transaction
(ingestion, edits, renames, deletions), the context statement reads the versions of the
agent's KBs on every call, and a copy is used only when its version is the one just read.
A copy is loaded in one statement that reads the version with the chunks, so it is exactly
the chunks of that version. A KB not held, or held at another version, is searched in
PostgreSQL as before while its copy is (re)loaded in the background; no call waits for a
load.

Memory is bounded (``QUERY__VECTOR_CACHE_MB`` per process, least recently used KBs go
first): at 512 dimensions a 1,000-chunk KB of 500-token chunks takes about 4 MB (vectors and
text), at 1,536 about 8 MB. Only KBs of agents small enough for exact search are held; larger
agents use the HNSW index in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
from app.observability.metrics import VECTOR_CACHE_BYTES
from app.query import repository as sql

log = logging.getLogger(__name__)

# Per chunk beyond its vector and text: the id, list slots, the section and page objects.
_ROW_OVERHEAD_BYTES = 120


@dataclass(frozen=True, slots=True)
class KBVectors:
    """One KB's chunks of one embedding model, at one content version. Row i of ``matrix``
    (unit length, float32) is chunk ``ids[i]``; a chunk whose stored vector has no length
    keeps a zero row and ``zero[i]`` set, and ranks last, as pgvector ranks its NaN
    distance."""

    kb_id: uuid.UUID
    version: int
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

    @classmethod
    def from_rows(cls, kb_id: uuid.UUID, rows: Sequence[Any]) -> KBVectors:
        """From KB_VECTORS_SQL's rows (a KB without chunks has one row, its version)."""
        version = int(rows[0]["version"])
        rows = [r for r in rows if r["id"] is not None]
        ids = np.fromiter((r["id"] for r in rows), dtype=np.int64, count=len(rows))
        if rows:
            header = rows[0]["v"][:2]
            dim = int.from_bytes(header, "big")
            size = 4 + 4 * dim
            if any(len(r["v"]) != size for r in rows):
                raise ValueError(f"KB {kb_id}: chunks of one model with different dimensions")
            # Each row as sent: a 4-byte header, then the big-endian floats.
            wire = np.dtype([("header", "V4"), ("v", ">f4", (dim,))])
            matrix = np.frombuffer(b"".join(r["v"] for r in rows), dtype=wire)["v"].astype(np.float32)
            norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
            zero = norms == 0
            matrix /= np.where(zero, 1.0, norms)[:, None].astype(np.float32)
        else:
            matrix = np.zeros((0, 0), dtype=np.float32)
            zero = np.zeros(0, dtype=np.bool_)
        # One string object per document title, not one per chunk.
        titles_by_doc: dict[uuid.UUID, str] = {}
        titles = [titles_by_doc.setdefault(r["document_id"], r["title"]) for r in rows]
        texts = [r["text"] for r in rows]
        nbytes = (
            matrix.nbytes
            + ids.nbytes
            + sum(sys.getsizeof(t) for t in texts)
            + sum(sys.getsizeof(t) for t in titles_by_doc.values())
            + len(rows) * _ROW_OVERHEAD_BYTES
        )
        return cls(
            kb_id=kb_id,
            version=version,
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
        )

    def nearest(self, query: npt.NDArray[np.float32], limit: int) -> list[tuple[float, int, int]]:
        """The ``limit`` chunks nearest to the unit-length ``query`` as (similarity, chunk id,
        row), best first, ties by id: the order of VECTOR_EXACT's ``ORDER BY dist, id``."""
        n = len(self.ids)
        if n == 0:
            return []
        # einsum, not ``@``: ``@`` is OpenBLAS's sgemv, whose worker threads spin after each
        # call; between paced calls they kept a whole core busy (measured: 57 ms of service CPU
        # per call instead of 5 under query_bench's paced phase). einsum's own loop costs 45 us
        # instead of 12 at 1,000 x 512, and no thread.
        sims = np.einsum("ij,j->i", self.matrix, query)
        if self.zero is not None:
            sims[self.zero] = -np.inf
        if n > limit:
            # Every row as close as the limit-th one, so ties at the cut are broken by id
            # as in SQL, not by argpartition's order.
            kth = np.argpartition(-sims, limit - 1)[limit - 1]
            rows = np.flatnonzero(sims >= sims[kth])
        else:
            rows = np.arange(n)
        row_list = rows.tolist()
        ranked = sorted(
            zip(sims[rows].tolist(), self.ids[rows].tolist(), row_list, strict=True), key=_best_first
        )
        return [(0.0 if s == -np.inf else s, i, r) for s, i, r in ranked[:limit]]


def _best_first(item: tuple[float, int, int]) -> tuple[float, int]:
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
    ) -> None:
        self.engine = engine
        self.model_key = model_key
        self.budget_bytes = budget_bytes
        # A KB being filled changes version with every document: it is reloaded at most this
        # often, and searched in PostgreSQL in between.
        self.reload_interval_s = reload_interval_s
        self._entries: OrderedDict[uuid.UUID, KBVectors] = OrderedDict()
        self._bytes = 0
        self._loading: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._last_load: dict[uuid.UUID, float] = {}
        # KBs found too large for the whole budget, by the version that was: not loaded again
        # until it changes.
        self._too_large: dict[uuid.UUID, int] = {}
        # One load at a time per process: a cold start must not flood the database.
        self._load_slot = asyncio.Semaphore(1)
        self.loads = 0

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def held(self) -> dict[uuid.UUID, int]:
        """KB id -> version of every KB held (tests, diagnostics)."""
        return {kb: e.version for kb, e in self._entries.items()}

    def lookup(
        self, org_id: uuid.UUID, kb_ids: Sequence[uuid.UUID], versions: Sequence[int]
    ) -> list[KBVectors] | None:
        """The copies of ``kb_ids`` at exactly ``versions``, or None when any is missing;
        then every missing one is loaded in the background."""
        if not self.enabled:
            return None
        found: list[KBVectors] = []
        complete = True
        for kb_id, version in zip(kb_ids, versions, strict=True):
            entry = self._entries.get(kb_id)
            if entry is not None and entry.version == version:
                self._entries.move_to_end(kb_id)
                found.append(entry)
            else:
                complete = False
                self._want(org_id, kb_id, version)
        return found if complete else None

    def _want(self, org_id: uuid.UUID, kb_id: uuid.UUID, version: int) -> None:
        if kb_id in self._loading or self._too_large.get(kb_id) == version:
            return
        now = time.monotonic()
        if now - self._last_load.get(kb_id, -1e9) < self.reload_interval_s:
            return
        self._last_load[kb_id] = now
        task = asyncio.create_task(self._load(org_id, kb_id))
        self._loading[kb_id] = task
        task.add_done_callback(partial(self._loaded, kb_id))

    def _loaded(self, kb_id: uuid.UUID, _task: asyncio.Task[None]) -> None:
        self._loading.pop(kb_id, None)

    async def load(self, org_id: uuid.UUID, kb_id: uuid.UUID) -> KBVectors | None:
        """Read the KB's current chunks and hold them; None when the KB is gone or too large."""
        async with self._load_slot, raw_connection(self.engine) as conn:
            rows = await conn.fetch(sql.KB_VECTORS_SQL, kb_id, org_id, self.model_key)
        if not rows:
            self._drop(kb_id)
            return None
        # Building a copy is Python over every row (tens of ms for a 20,000-chunk KB): in a
        # thread, so the event loop keeps answering calls meanwhile.
        entry = await asyncio.to_thread(KBVectors.from_rows, kb_id, rows)
        self.loads += 1
        if entry.nbytes > self.budget_bytes:
            self._drop(kb_id)
            self._too_large[kb_id] = entry.version
            log.info("KB %s (%d bytes) is larger than QUERY__VECTOR_CACHE_MB", kb_id, entry.nbytes)
            return None
        held = self._entries.get(kb_id)
        if held is not None and held.version > entry.version:
            return held  # a newer copy landed meanwhile
        self._drop(kb_id)
        self._too_large.pop(kb_id, None)
        self._entries[kb_id] = entry
        self._bytes += entry.nbytes
        while self._bytes > self.budget_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.nbytes
        VECTOR_CACHE_BYTES.set(self._bytes)
        return entry

    async def _load(self, org_id: uuid.UUID, kb_id: uuid.UUID) -> None:
        try:
            await self.load(org_id, kb_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The call that wanted it was already served from PostgreSQL; the next one after
            # reload_interval_s tries again.
            log.warning("could not load KB %s into memory", kb_id, exc_info=True)

    def _drop(self, kb_id: uuid.UUID) -> None:
        entry = self._entries.pop(kb_id, None)
        if entry is not None:
            self._bytes -= entry.nbytes
            VECTOR_CACHE_BYTES.set(self._bytes)

    async def settle(self) -> None:
        """Wait for the loads under way (tests, start-up warming)."""
        while self._loading:
            await asyncio.gather(*list(self._loading.values()), return_exceptions=True)

    async def close(self) -> None:
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
