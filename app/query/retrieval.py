"""Hybrid retrieval over an agent's knowledge bases, correct under tenant filtering.

pgvector's HNSW index filters *after* scanning ``ef_search`` candidates, so a small KB
among many can come back with fewer than top-k rows, even none (FIELD-NOTES). The plan is
chosen per request from the agent's chunk count:

* ``exact``: up to ``exact_search_max_chunks`` chunks, compare every chunk of the agent's
  KBs (b-tree on kb_id). Always complete; tens of milliseconds at most at that size.
* ``iterative``: larger, on pgvector >= 0.8: HNSW with ``hnsw.iterative_scan`` so the scan
  continues until enough rows pass the filter.
* ``hnsw``: larger, on older pgvector: HNSW with ``ef_search`` raised to its maximum and
  the filter applied after; approximate (documented in docs/OPERATIONS.md).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.embeddings.base import embedder_family
from app.query import repository as sql

MIN_ITERATIVE = (0, 8, 0)

# Default weights of the vector ranks in the fusion (BM25 weighs 1), measured on squad-dev
# (docs/BENCHMARKS.md). The lexical embedder is a hashed bag of words: BM25 ranks the same
# evidence better, and any say for it lowered hit@5 (weight 0: 0.956, 0.1: 0.944, 0.3: 0.907,
# 0.5: 0.896); at 0 its candidates still fill the list when BM25 finds fewer than top_k.
# all-MiniLM-L6-v2 (local): hit@5 0.950 at 0.5, 0.938 at 1. OpenAI's models are not measured
# here (no network) and keep an equal say.
_VECTOR_WEIGHTS = {"lexical": 0.0, "local": 0.5}


def default_vector_weight(configured: float | None, model_key: str) -> float:
    if configured is not None:
        return configured
    return _VECTOR_WEIGHTS.get(embedder_family(model_key), 1.0)


@dataclass(frozen=True, slots=True)
class Retrieval:
    candidates: list[Candidate]
    plan: str
    embedded: bool
    timing_ms: float


@dataclass(frozen=True, slots=True)
class TextHits:
    """BM25's candidates, best first."""

    ids: list[int]
    scores: list[float]
    timing_ms: float


@dataclass(frozen=True, slots=True)
class VectorHits:
    """The vector side's candidates, nearest first, searched on a connection of their own."""

    ids: list[int]
    distances: list[float]
    plan: str
    embedded: bool
    timing_ms: float


@dataclass(frozen=True, slots=True)
class Candidate:
    chunk_id: int
    document_id: uuid.UUID
    title: str
    section: str | None
    page: int | None
    text: str
    vector_rank: int | None
    text_rank: int | None
    similarity: float | None
    text_score: float | None
    score: float


def parse_version(text: str | None) -> tuple[int, ...]:
    if not text:
        return (0,)
    return tuple(int(p) for p in text.split(".") if p.isdigit())


class Retriever:
    def __init__(
        self,
        *,
        dimensions: int,
        pgvector_version: tuple[int, ...],
        exact_max_chunks: int,
        rrf_k: int,
        vector_weight: float = 1.0,
    ) -> None:
        self.dimensions = dimensions
        self.iterative = pgvector_version >= MIN_ITERATIVE
        self.exact_max_chunks = exact_max_chunks
        self.rrf_k = rrf_k
        self.vector_weight = vector_weight
        # Statements are built once; asyncpg caches their preparation per connection.
        self._fused = {
            kind: sql.FUSED_SQL.format(vector_candidates=self._fragment(kind, sql.FUSED_PARAMS))
            for kind in ("exact", "hnsw")
        }
        self._alone = {kind: self._fragment(kind, sql.ALONE_PARAMS) for kind in ("exact", "hnsw")}
        self._given = sql.FUSED_SQL.format(vector_candidates=sql.VECTOR_GIVEN)

    def _fragment(self, kind: str, params: dict[str, str]) -> str:
        if kind == "exact":
            return sql.VECTOR_EXACT.format(**params)
        return sql.VECTOR_HNSW.format(dim=self.dimensions, **params)

    def statement(self, plan: str) -> str:
        """The vector-and-fusion statement of ``plan`` (TEXT_SQL runs before it)."""
        return self._fused["exact" if plan == "exact" else "hnsw"]

    def vector_statement(self, plan: str) -> str:
        """The vector search of ``plan`` alone, for a second connection."""
        return self._alone["exact" if plan == "exact" else "hnsw"]

    def plan(self, chunk_total: int) -> str:
        if chunk_total <= self.exact_max_chunks:
            return "exact"
        return "iterative" if self.iterative else "hnsw"

    @staticmethod
    async def _fetch(conn: Any, plan: str, statement: str, args: Sequence[Any]) -> list[Any]:
        """Run a statement holding a vector search, with the index settings of its plan."""
        if plan == "exact":
            return await conn.fetch(statement, *args)  # type: ignore[no-any-return]
        async with conn.transaction():
            if plan == "iterative":
                await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                await conn.execute("SET LOCAL hnsw.ef_search = 100")
            else:
                await conn.execute("SET LOCAL hnsw.ef_search = 1000")
            return await conn.fetch(statement, *args)  # type: ignore[no-any-return]

    async def bm25(
        self,
        conn: Any,
        *,
        kb_ids: Sequence[uuid.UUID],
        question: str,
        language: str,
        chunk_total: int,
        candidates: int,
    ) -> TextHits:
        """The text side, run while the question's embedding is on its way."""
        t = time.perf_counter()
        rows = await conn.fetch(sql.TEXT_SQL, list(kb_ids), question, language, chunk_total, candidates)
        return TextHits(
            [r["id"] for r in rows], [r["rank"] for r in rows], timing_ms=(time.perf_counter() - t) * 1000
        )

    async def vector_search(
        self,
        conn: Any,
        *,
        vector: Sequence[float] | None,
        kb_ids: Sequence[uuid.UUID],
        model_key: str,
        chunk_total: int,
        candidates: int,
    ) -> VectorHits:
        """The vector side alone, for ``fuse`` to combine with BM25's list later. Without a
        vector (provider down or too slow) there is nothing to search."""
        plan = self.plan(chunk_total)
        if vector is None:
            return VectorHits([], [], plan, embedded=False, timing_ms=0.0)
        t = time.perf_counter()
        rows = await self._fetch(
            conn, plan, self.vector_statement(plan), (vector, list(kb_ids), candidates, model_key)
        )
        return VectorHits(
            [r["id"] for r in rows],
            [r["dist"] for r in rows],
            plan,
            embedded=True,
            timing_ms=(time.perf_counter() - t) * 1000,
        )

    async def fuse(
        self,
        conn: Any,
        *,
        text: TextHits,
        vector: Sequence[float] | VectorHits | None,
        kb_ids: Sequence[uuid.UUID],
        model_key: str,
        chunk_total: int,
        candidates: int,
        top_k: int,
    ) -> Retrieval:
        """BM25's list fused with the vector side, and the chosen chunks. ``vector`` is the
        question's vector, searched here in the same statement, or the hits of
        ``vector_search``; without either (provider down or too slow) BM25 alone answers.
        ``timing_ms`` counts every statement of the retrieval."""
        head = (model_key, self.rrf_k, top_k, self.vector_weight, text.ids, text.scores)
        t = time.perf_counter()
        if isinstance(vector, VectorHits):
            plan, embedded = vector.plan, vector.embedded
            rows = await conn.fetch(self._given, *head, vector.ids, vector.distances)
            spent = text.timing_ms + vector.timing_ms
        else:
            plan = self.plan(chunk_total)
            embedded = vector is not None
            if vector is None:
                vector, vector_key = [1.0] + [0.0] * (self.dimensions - 1), "-"
            else:
                vector_key = model_key
            # A float4[] travels in asyncpg's binary format: 9 us for 512 dimensions where
            # the '[...]' text form took 220 us to write (and PostgreSQL as long to parse).
            args = (*head, vector, list(kb_ids), candidates, vector_key)
            rows = await self._fetch(conn, plan, self.statement(plan), args)
            spent = text.timing_ms
        spent += (time.perf_counter() - t) * 1000
        found = [
            Candidate(
                chunk_id=r["id"],
                document_id=r["document_id"],
                title=r["title"],
                section=r["section"],
                page=r["page"],
                text=r["text"],
                vector_rank=r["vector_rank"],
                text_rank=r["text_rank"],
                similarity=float(r["similarity"]) if r["similarity"] is not None else None,
                text_score=float(r["text_score"]) if r["text_score"] is not None else None,
                score=float(r["score"]),
            )
            for r in rows
        ]
        return Retrieval(found, plan, embedded=embedded, timing_ms=spent)
