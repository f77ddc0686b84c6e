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
* ``memory``: the ``exact`` plan over copies of the agent's KBs held in the process
  (``app/query/kb_vectors.py``), fused here in Python as FUSED_SQL fuses; no round
  trip after the agent's context statement.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.embeddings.base import embedder_family
from app.query import repository as sql
from app.query.kb_vectors import KBVectors, nearest_first

MIN_ITERATIVE = (0, 8, 0)

# Default weights of the vector ranks in the fusion (BM25 weighs 1), measured on squad-dev
# (docs/BENCHMARKS.md). The lexical embedder is a hashed bag of words: BM25 ranks the same
# evidence better, and any say for it lowered hit@5 (weight 0: 0.956, 0.1: 0.944, 0.3: 0.907,
# 0.5: 0.896); at 0 its candidates still fill the list when BM25 finds fewer than top_k.
# all-MiniLM-L6-v2 (local, sentence-transformers): hit@5 0.950 at 0.5, 0.938 at 1. For the
# offline default (minilm) no weight served both callers-dev's paraphrases (which want the
# vectors) and SQuAD's reused words (which want BM25) at k = 60; a small k lets each list's
# top hits lead, and k = 4 with weight 0.8 serves both (docs/BENCHMARKS.md has the grid).
# OpenAI's models are not measured here (no network): an equal say, k = 60.
_VECTOR_WEIGHTS = {"lexical": 0.0, "local": 0.5, "minilm": 0.8}
_RRF_K = {"minilm": 4}


def default_vector_weight(configured: float | None, model_key: str) -> float:
    if configured is not None:
        return configured
    return _VECTOR_WEIGHTS.get(embedder_family(model_key), 1.0)


def default_rrf_k(configured: int | None, model_key: str) -> int:
    if configured is not None:
        return configured
    return _RRF_K.get(embedder_family(model_key), 60)


@dataclass(frozen=True, slots=True)
class Retrieval:
    candidates: list[Candidate]
    plan: str
    embedded: bool
    timing_ms: float


@dataclass(frozen=True, slots=True)
class TextHits:
    """BM25's candidates, best first (AGENT_CONTEXT_SQL finds them)."""

    ids: list[int]
    scores: list[float]


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
        # Statements are built once per shape and size; asyncpg caches their preparation
        # per connection.
        self._statements: dict[tuple[str, int, int, bool], str] = {}

    def statement(self, plan: str, kbs: int, *, candidates: int, top_k: int, hidden: bool = False) -> str:
        """The vector-and-fusion statement of ``plan`` for an agent reading ``kbs`` KBs (BM25
        runs before it, in AGENT_CONTEXT_SQL), with the sizes written in (see FUSED_SQL), and
        when ``hidden`` the chunks of the documents hidden from the call ($7) left out."""
        shape = ("one" if kbs == 1 else "any") if plan == "exact" else "hnsw"
        key = (shape, candidates, top_k, hidden)
        statement = self._statements.get(key)
        if statement is None:
            hidden_filter = sql.HIDDEN_FILTER if hidden else ""
            if shape == "hnsw":
                vector = sql.VECTOR_HNSW.format(
                    dim=int(self.dimensions), candidates=int(candidates), hidden_filter=hidden_filter
                )
            else:
                kb_filter = sql.ONE_KB if shape == "one" else sql.ANY_KB
                vector = sql.VECTOR_EXACT.format(
                    kb_filter=kb_filter, candidates=int(candidates), hidden_filter=hidden_filter
                )
            statement = self._statements[key] = sql.FUSED_SQL.format(
                vector_candidates=vector,
                weight=repr(float(self.vector_weight)),
                rrf_k=int(self.rrf_k),
                top_k=int(top_k),
            )
        return statement

    def plan(self, chunk_total: int) -> str:
        if chunk_total <= self.exact_max_chunks:
            return "exact"
        return "iterative" if self.iterative else "hnsw"

    async def fuse(
        self,
        conn: Any,
        *,
        text: TextHits,
        vector: Sequence[float] | None,
        kb_ids: Sequence[uuid.UUID],
        model_key: str,
        chunk_total: int,
        candidates: int,
        top_k: int,
        hidden: Sequence[uuid.UUID] = (),
    ) -> Retrieval:
        """The vector side, fused with ``text``, and the chosen chunks, none of the ``hidden``
        documents (``text`` has none either). Without a vector (provider down or too slow)
        BM25 alone answers."""
        plan = self.plan(chunk_total)
        if vector is None:
            vector, vector_key = [1.0] + [0.0] * (self.dimensions - 1), "-"
        else:
            vector_key = model_key
        args: tuple[Any, ...] = (
            # A float4[] travels in asyncpg's binary format: 9 us for 512 dimensions where
            # the '[...]' text form took 220 us to write (and PostgreSQL as long to parse).
            vector,
            list(kb_ids),
            model_key,
            vector_key,
            text.ids,
            text.scores,
        )
        if hidden:
            args = (*args, list(hidden))
        statement = self.statement(plan, len(kb_ids), candidates=candidates, top_k=top_k, hidden=bool(hidden))
        t = time.perf_counter()
        if plan == "exact":
            rows = await conn.fetch(statement, *args)
        else:
            async with conn.transaction():
                if plan == "iterative":
                    await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    await conn.execute("SET LOCAL hnsw.ef_search = 100")
                else:
                    await conn.execute("SET LOCAL hnsw.ef_search = 1000")
                rows = await conn.fetch(statement, *args)
        spent = (time.perf_counter() - t) * 1000
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
        return Retrieval(found, plan, embedded=vector_key != "-", timing_ms=spent)

    async def fuse_memory(
        self,
        held: Sequence[KBVectors],
        *,
        text: TextHits,
        vector: Sequence[float] | None,
        candidates: int,
        top_k: int,
        hidden: Sequence[uuid.UUID] = (),
    ) -> Retrieval | None:
        """``fuse`` over KBs held in memory: FUSED_SQL's exact plan, its chunks in its order
        with its scores (but for near-ties of the vector side: see kb_vectors.py), none of the
        ``hidden`` documents, or None when the vector's size is not the copies' (the caller
        searches in SQL)."""
        hidden_set = frozenset(hidden)
        t = time.perf_counter()
        nearest: list[tuple[float, int, KBVectors, int]] = []
        if vector is not None:
            query = np.asarray(vector, dtype=np.float32)
            if any(kb.matrix.shape[1] != query.shape[0] for kb in held if len(kb.ids)):
                return None
            norm = float(np.sqrt(np.einsum("i,i->", query, query)))  # no BLAS: see KBVectors.similarities
            if norm > 0:
                query = query / np.float32(norm)
            for kb in held:
                sims = await kb.similarities(query)
                shown = kb.shown_rows(hidden_set)
                nearest.extend(
                    (sim, chunk_id, kb, at) for sim, chunk_id, at in kb.nearest(sims, candidates, shown)
                )
            if len(held) > 1:
                nearest.sort(key=nearest_first)
            del nearest[candidates:]
        # chunk id -> [vector rank, text rank, similarity, text score, KB copy, row]
        # A chunk without length ranked last as -inf; pgvector reports NaN, we report 0.
        fused: dict[int, list[Any]] = {
            chunk_id: [rank, None, sim if sim != -np.inf else 0.0, None, kb, at]
            for rank, (sim, chunk_id, kb, at) in enumerate(nearest, 1)
        }
        for rank, (chunk_id, score) in enumerate(zip(text.ids, text.scores, strict=True), 1):
            entry = fused.get(chunk_id)
            if entry is None:
                fused[chunk_id] = [None, rank, None, score, None, None]
            else:
                entry[1], entry[3] = rank, score
        weight, k = float(self.vector_weight), self.rrf_k
        scored: list[tuple[float, int | None, int, int | None, float | None, float | None, Any, Any]] = []
        for chunk_id, (vr, tr, sim, text_score, kb, at) in fused.items():
            score = (weight / (k + vr) if vr is not None else 0.0) + (
                1.0 / (k + tr) if tr is not None else 0.0
            )
            scored.append((score, vr, chunk_id, tr, sim, text_score, kb, at))
        # ORDER BY score DESC, vector_rank NULLS LAST, id; LIMIT top_k
        scored.sort(key=_fused_first)
        found: list[Candidate] = []
        for score, vr, chunk_id, tr, sim, text_score, in_vector, at in scored[:top_k]:
            h: KBVectors | None = in_vector
            row: int = at
            if h is None:
                # A BM25 hit: find its row. One missing (a chunk of another embedding model,
                # which chunk_terms does not know) is dropped, as FUSED_SQL's join drops it.
                h, row = _locate(held, chunk_id)
                if h is None:
                    continue
            found.append(
                Candidate(
                    chunk_id=chunk_id,
                    document_id=h.document_ids[row],
                    title=h.titles[row],
                    section=h.sections[row],
                    page=h.pages[row],
                    text=h.texts[row],
                    vector_rank=vr,
                    text_rank=tr,
                    similarity=sim,
                    text_score=text_score,
                    score=score,
                )
            )
        spent = (time.perf_counter() - t) * 1000
        return Retrieval(found, "memory", embedded=vector is not None, timing_ms=spent)


def _locate(held: Sequence[KBVectors], chunk_id: int) -> tuple[KBVectors | None, int]:
    for h in held:
        row = h.position.get(chunk_id)
        if row is not None:
            return h, row
    return None, 0


def _fused_first(item: tuple[Any, ...]) -> tuple[float, bool, int, int]:
    score, vector_rank, chunk_id = item[0], item[1], item[2]
    return (-score, vector_rank is None, vector_rank or 0, chunk_id)
