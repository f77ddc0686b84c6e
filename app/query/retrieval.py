"""Hybrid retrieval over an agent's knowledge bases: BM25, the vector side, the choice
between in-memory copies and SQL, and the one fusion of the two lists.

BM25 runs in the agent's context statement (AGENT_CONTEXT_SQL), in the round trip that reads
the agent's KBs, so it costs no round trip of its own; ``Retriever.corpus`` reads its list from
that row. Once an agent's KBs are held in memory, the statement leaves BM25 to their copies'
postings (``rank_text``: the same ranking, PostgreSQL's aggregation was most of the
statement's time) and returns the question's lexemes instead.
The vector side is searched where the KBs are:

* ``memory``: copies of the agent's KBs held in the process (``app/query/kb_vectors.py``),
  compared in numpy; no round trip after the context statement.
* ``exact``: up to ``exact_search_max_chunks`` chunks, PostgreSQL compares every chunk of the
  agent's KBs (b-tree on kb_id). Always complete; tens of milliseconds at most at that size.
* ``iterative``: larger, on pgvector >= 0.8: HNSW with ``hnsw.iterative_scan`` so the scan
  continues until enough rows pass the filter (pgvector's HNSW filters *after* scanning
  ``ef_search`` candidates: a small KB among many could come back short, FIELD-NOTES).
* ``hnsw``: larger, on older pgvector: HNSW with ``ef_search`` raised to its maximum and
  the filter applied after; approximate (documented in docs/OPERATIONS.md).

Whichever side found them, the two lists are fused by ``fuse``, one function for every plan:
the SQL plans fetch the vector candidates and the rows of both lists' chunks in one statement
(VECTOR_SQL), and the ranking is done here. Where sentence vectors are stored (the offline
default), the vector side's candidates are first scored again with their best sentence
(``Retriever.rescore``), alike for every plan.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
from app.embeddings.base import embedder_family
from app.query import repository as sql
from app.query.kb_vectors import KBVectorCache, KBVectors, Postings, nearest_first
from app.query.sentences import ChunkSentences

MIN_ITERATIVE = (0, 8, 0)
# Agents remembered as held (Retriever.ranks_text_in_memory) before the memory is cleared.
_MAX_AGENTS = 100_000

# Default weights of the vector ranks in the fusion (BM25 weighs 1), measured on squad-dev
# (docs/BENCHMARKS.md). The lexical embedder is a hashed bag of words: BM25 ranks the same
# evidence better, and any say for it lowered hit@5 (weight 0: 0.956, 0.1: 0.944, 0.3: 0.907,
# 0.5: 0.896); at 0 its candidates still fill the list when BM25 finds fewer than top_k.
# all-MiniLM-L6-v2 (local, sentence-transformers): hit@5 0.950 at 0.5, 0.938 at 1. For the
# offline default (minilm) no weight served both callers-dev's paraphrases (which want the
# vectors) and SQuAD's reused words (which want BM25) at k = 60; a small k lets each list's
# top hits lead, and k = 4 serves both. With each candidate's best sentence in its score
# (Retriever.rescore) the vectors earn an equal say or more: weight 1 gave the best hit@5 of
# those two sets together (0.959 / 0.965; 0.8: 0.938 / 0.967, 1.2: 0.959 / 0.960), but on
# organisations nobody had tuned on (bench/data/callers-fresh) 1.5 finds 0.885 against 0.844,
# callers-dev 0.964 and squad-dev 0.959 (docs/BENCHMARKS.md, twenty-first session). OpenAI's
# models are not measured here (no network): an equal say, k = 60.
_VECTOR_WEIGHTS = {"lexical": 0.0, "local": 0.5, "minilm": 1.5}
_RRF_K = {"minilm": 4}


def default_vector_weight(configured: float | None, model_key: str) -> float:
    if configured is not None:
        return configured
    return _VECTOR_WEIGHTS.get(embedder_family(model_key), 1.0)


# The best sentence's share of a vector candidate's score (Retriever.rescore), measured on
# callers-dev and squad-dev at weight 1: 0.3 gave hit@5 0.943 / 0.959, 0.5 0.959 / 0.965, 0.7
# 0.953 / 0.968 (docs/BENCHMARKS.md). Only embedders whose sentence vectors ingestion stores
# (SentenceEncoder) have any.
_SENTENCE_WEIGHTS = {"minilm": 0.5}


def default_sentence_weight(configured: float | None, model_key: str) -> float:
    if configured is not None:
        return configured
    return _SENTENCE_WEIGHTS.get(embedder_family(model_key), 0.0)


def default_rrf_k(configured: int | None, model_key: str) -> int:
    if configured is not None:
        return configured
    return _RRF_K.get(embedder_family(model_key), 60)


@dataclass(frozen=True, slots=True)
class TextHits:
    """BM25's candidates, best first (AGENT_CONTEXT_SQL finds them)."""

    ids: list[int]
    scores: list[float]


class Ranked(NamedTuple):
    """One chunk of the fused list: its score and where each list put it."""

    score: float
    vector_rank: int | None
    chunk_id: int
    text_rank: int | None
    similarity: float | None
    text_score: float | None
    # Its rank by its own vector's cosine alone, before the best-sentence term reordered the
    # vector list (Retriever.rescore); its vector_rank when there was none.
    cosine_rank: int | None = None


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
    cosine_rank: int | None = None

    @classmethod
    def ranked(
        cls, f: Ranked, document_id: uuid.UUID, title: str, section: str | None, page: int | None, text: str
    ) -> Candidate:
        """A chunk of the fused list with its row, wherever the row was read."""
        return cls(
            f.chunk_id, document_id, title, section, page, text,
            f.vector_rank, f.text_rank, f.similarity, f.text_score, f.score, f.cosine_rank,
        )  # fmt: skip


def fuse(
    vector: Sequence[tuple[float, int]],
    text: TextHits,
    *,
    weight: float,
    k: int,
    cosine_ranks: Mapping[int, int] | None = None,
) -> list[Ranked]:
    """Weighted reciprocal rank fusion of the vector list ((similarity, chunk id), best first)
    and BM25's: a chunk scores ``weight / (k + its vector rank) + 1 / (k + its text rank)``
    (float64, a missing rank adding 0), best first; ties go to the better vector rank, a
    chunk of the vector list before one BM25 alone found, then to the smaller id. A vector
    hit's ``cosine_rank`` is read from ``cosine_ranks`` (rescored lists), else its rank."""
    text_rank = {chunk_id: rank for rank, chunk_id in enumerate(text.ids, 1)}
    scores = text.scores
    ranked: list[Ranked] = []
    for vr, (similarity, chunk_id) in enumerate(vector, 1):
        tr = text_rank.pop(chunk_id, None)
        cr = vr if cosine_ranks is None else cosine_ranks[chunk_id]
        if tr is None:
            ranked.append(Ranked(weight / (k + vr), vr, chunk_id, None, similarity, None, cr))
        else:
            score = weight / (k + vr) + 1.0 / (k + tr)
            ranked.append(Ranked(score, vr, chunk_id, tr, similarity, scores[tr - 1], cr))
    for chunk_id, tr in text_rank.items():
        ranked.append(Ranked(1.0 / (k + tr), None, chunk_id, tr, None, scores[tr - 1]))
    ranked.sort(key=_fused_first)
    return ranked


def _fused_first(r: Ranked) -> tuple[float, bool, int, int]:
    return (-r.score, r.vector_rank is None, r.vector_rank or 0, r.chunk_id)


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The ``top_k`` chunks chosen, with how they were found. ``ranked`` is every chunk
    either list found, in fused order; ``every`` gives them as candidates (the playground)."""

    candidates: list[Candidate]
    plan: str
    embedded: bool
    timing_ms: float
    ranked: list[Ranked]
    chunk: Callable[[Ranked], Candidate | None]
    # Where BM25 ranked: in the context statement, over the copies in memory, or in a
    # statement of its own (copies expected, found stale).
    text_plan: str = "context"

    def every(self) -> list[Candidate]:
        return _chosen(self.ranked, self.chunk)


def _chosen(ranked: Sequence[Ranked], chunk: Callable[[Ranked], Candidate | None]) -> list[Candidate]:
    # A chunk whose row is missing (one of another embedding model, which chunk_terms does
    # not know, found by BM25) is dropped: the list is shorter, never wrong.
    return [c for r in ranked if (c := chunk(r)) is not None]


@dataclass(frozen=True, slots=True)
class Corpus:
    """What one call searches: the agent's KBs as its context row read them (ids, content
    stamps, text-search languages, chunk count), the documents hidden from the call, and
    BM25's hits, or, when they are left to the copies in memory (``text`` None), the
    question's lexemes in each language of the KBs."""

    org_id: uuid.UUID
    agent_id: uuid.UUID
    kb_ids: list[uuid.UUID]
    versions: list[int]
    changed: list[dt.datetime]
    languages: list[str]
    chunk_total: int
    hidden: list[uuid.UUID]
    text: TextHits | None
    question: str = ""
    terms: dict[str, list[str]] = field(default_factory=dict)
    # Where ``text`` was ranked: "context" (the context statement) or "sql" (TEXT_SQL).
    text_plan: str = "context"


def rank_text(
    held: Sequence[KBVectors],
    terms: dict[str, list[str]],
    *,
    total: int,
    hidden: frozenset[uuid.UUID],
    limit: int,
) -> TextHits:
    """AGENT_CONTEXT_SQL's BM25 over the copies' postings: each KB's chunks scored for the
    question's lexemes in its language (``terms``), a lexeme weighing by its document
    frequency among all the KBs' ``total`` chunks and a chunk's length against the mean of
    the postings read, the chunks of ``hidden`` documents left out of the ranking (not of the
    weights). The same float64 arithmetic in the same order as the SQL, so the scores agree
    but for the order in which a chunk's terms are summed (a last bit at most)."""
    found: list[tuple[Postings, list[tuple[str, int, int]]]] = []
    frequency: dict[str, int] = {}
    for kb in held:
        postings = kb.postings
        assert postings is not None
        lexemes = dict.fromkeys(terms.get(postings.language, ()))  # each once, as in SQL's DISTINCT
        spans = [(t, *span) for t in lexemes if (span := postings.span(t)) is not None]
        for t, a, b in spans:
            frequency[t] = frequency.get(t, 0) + (b - a)
        if spans:
            found.append((postings, spans))
    if not found:
        return TextHits([], [])
    weight = {t: math.log(1 + (max(float(total) - n, 0) + 0.5) / (n + 0.5)) for t, n in frequency.items()}
    gathered = []
    length_sum, count = 0.0, 0
    for postings, spans in found:
        slots = np.concatenate([postings.slots[a:b] for _, a, b in spans])
        tf = np.concatenate([postings.tf[a:b] for _, a, b in spans]).astype(np.float64)
        w = np.repeat([weight[t] for t, _, _ in spans], [b - a for _, a, b in spans])
        dl = postings.dl[slots]
        length_sum += float(dl.sum())
        count += len(dl)
        gathered.append((postings, slots, tf, w, dl))
    avgdl = max(length_sum / count, 1.0)
    ids, scores = [], []
    for postings, slots, tf, w, dl in gathered:
        contribution = w * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))
        summed = np.bincount(slots, weights=contribution, minlength=len(postings.ids))
        scored = np.zeros(len(postings.ids), dtype=np.bool_)
        scored[slots] = True
        of_hidden = postings.hidden_slots(hidden)
        if of_hidden is not None:
            scored &= ~of_hidden
        rows = np.flatnonzero(scored)
        ids.append(postings.ids[rows])
        scores.append(summed[rows])
    all_ids, all_scores = np.concatenate(ids), np.concatenate(scores)
    best = np.lexsort((all_ids, -all_scores))[:limit]
    return TextHits(all_ids[best].tolist(), all_scores[best].tolist())


def parse_version(text: str | None) -> tuple[int, ...]:
    if not text:
        return (0,)
    return tuple(int(p) for p in text.split(".") if p.isdigit())


class Retriever:
    """The one retriever of the query path. ``engine`` and ``kb_vectors`` are the service's
    (a retriever without them searches on the connection it is given, in SQL)."""

    def __init__(
        self,
        *,
        dimensions: int,
        pgvector_version: tuple[int, ...],
        exact_max_chunks: int,
        rrf_k: int,
        vector_weight: float = 1.0,
        candidates: int = 30,
        engine: AsyncEngine | None = None,
        model_key: str = "",
        kb_vectors: KBVectorCache | None = None,
        sentences: ChunkSentences | None = None,
        sentence_weight: float = 0.0,
    ) -> None:
        self.dimensions = dimensions
        self.iterative = pgvector_version >= MIN_ITERATIVE
        self.exact_max_chunks = exact_max_chunks
        self.rrf_k = rrf_k
        self.vector_weight = vector_weight
        self.candidates = candidates
        self.engine = engine
        self.model_key = model_key
        self.kb_vectors = kb_vectors
        # The vector side's best-sentence term (see rescore), when sentence vectors are stored.
        self.sentences = sentences if sentence_weight > 0 else None
        self.sentence_weight = sentence_weight
        # Statements are built once per shape; asyncpg caches their preparation per connection.
        self._statements: dict[tuple[str, int, bool, int, bool], str] = {}
        # (organisation, agent) -> whether its KBs were held at its last search here.
        self._held_agents: dict[tuple[uuid.UUID, uuid.UUID], bool] = {}

    def ranks_text_in_memory(self, org_id: uuid.UUID, agent_id: uuid.UUID) -> bool:
        """Whether to leave BM25 to the copies for this agent's call (AGENT_CONTEXT_SQL's
        $11): the agent's KBs are held, as they were at its last search in this process."""
        return self._held_agents.get((org_id, agent_id), False)

    def corpus(self, org_id: uuid.UUID, agent_id: uuid.UUID, question: str, ctx: Any) -> Corpus:
        """The call's corpus from AGENT_CONTEXT_SQL's row."""
        terms = ctx["question_terms"]
        return Corpus(
            org_id=org_id,
            agent_id=agent_id,
            kb_ids=ctx["kb_ids"],
            versions=ctx["kb_versions"],
            changed=ctx["kb_changed"],
            languages=ctx["kb_languages"] or [],
            chunk_total=ctx["chunk_total"],
            hidden=ctx["hidden_documents"],
            text=None if terms is not None else TextHits(ctx["text_ids"] or [], ctx["text_ranks"] or []),
            question=question,
            # SQLAlchemy's asyncpg set-up decodes jsonb on its pooled connections.
            terms={} if terms is None else terms if isinstance(terms, dict) else json.loads(terms),
        )

    async def held(self, corpus: Corpus, conn: Any) -> tuple[list[KBVectors] | None, Corpus]:
        """The corpus's KBs held in memory at the stamps just read, or None (then the missing
        ones are loaded in the background and this call searches in SQL); and the corpus,
        whose BM25 list, when it was left to copies that are gone or stale since, is ranked
        now in PostgreSQL on ``conn`` (one more round trip, while the embedding is on its way)."""
        held = None
        if self.kb_vectors is not None and self.plan(corpus.chunk_total) == "exact":
            held = self.kb_vectors.lookup(corpus.org_id, corpus.kb_ids, corpus.versions, corpus.changed)
            if held is not None and any(kb.postings is None for kb in held):
                held = None
        self._remember(corpus, held is not None)
        if held is None and corpus.text is None:
            rows = await conn.fetch(
                sql.TEXT_SQL,
                corpus.kb_ids,
                corpus.languages,
                corpus.question,
                corpus.chunk_total,
                self.candidates,
                corpus.hidden,
            )
            text = TextHits([r["id"] for r in rows], [r["rank"] for r in rows])
            corpus = replace(corpus, text=text, text_plan="sql")
        return held, corpus

    def _remember(self, corpus: Corpus, held: bool) -> None:
        key = (corpus.org_id, corpus.agent_id)
        if self._held_agents.get(key, False) != held:
            if len(self._held_agents) >= _MAX_AGENTS:
                self._held_agents.clear()
            self._held_agents[key] = held

    async def search(
        self,
        corpus: Corpus,
        vector: Sequence[float] | None,
        *,
        held: list[KBVectors] | None,
        top_k: int,
        conn: Any = None,
        complete: bool = False,
    ) -> Retrieval:
        """The ``top_k`` chunks for the question's ``vector`` (None: BM25 alone), in memory
        when ``held``, else in SQL on ``conn`` (or a connection of its own). With
        ``complete``, ``every()`` lists every candidate (in SQL, all of their rows are read)."""
        started = time.perf_counter()
        hidden = frozenset(corpus.hidden)
        text, text_plan = corpus.text, corpus.text_plan
        if text is None:
            assert held is not None, "BM25 left to copies: Retriever.held ranks it when there are none"
            text = rank_text(
                held, corpus.terms, total=corpus.chunk_total, hidden=hidden, limit=self.candidates
            )
            text_plan = "memory"
        if held is not None:
            found = await self.search_memory(
                held,
                text=text,
                vector=vector,
                candidates=self.candidates,
                top_k=top_k,
                hidden=hidden,
                text_plan=text_plan,
                started=started,
            )
            if found is not None:
                return found
        args: dict[str, Any] = {
            "text": text,
            "vector": vector,
            "kb_ids": corpus.kb_ids,
            "model_key": self.model_key,
            "chunk_total": corpus.chunk_total,
            "candidates": self.candidates,
            "top_k": top_k,
            "hidden": corpus.hidden,
            "complete": complete,
            "text_plan": text_plan,
        }
        if conn is not None:
            return await self.search_sql(conn, **args)
        assert self.engine is not None
        async with raw_connection(self.engine) as own:
            return await self.search_sql(own, **args)

    def statement(
        self,
        plan: str,
        kbs: int,
        *,
        candidates: int,
        top_k: int,
        hidden: bool = False,
        complete: bool = False,
    ) -> str:
        """The vector statement of ``plan`` for an agent reading ``kbs`` KBs (see VECTOR_SQL),
        leaving out, when ``hidden``, the chunks of the documents hidden from the call ($6),
        and reading in full the rows that can reach the ``top_k`` (all of them when
        ``complete``)."""
        shape = ("one" if kbs == 1 else "any") if plan == "exact" else "hnsw"
        key = (shape, candidates, hidden, top_k, complete)
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
            if complete:
                needed = sql.NEEDED_ALL
            elif self.sentences is not None:
                needed = sql.NEEDED_RESCORED.format(top_k=int(top_k))
            else:
                needed = sql.NEEDED_TOP.format(top_k=int(top_k))
            statement = self._statements[key] = sql.VECTOR_SQL.format(vector_candidates=vector, needed=needed)
        return statement

    def plan(self, chunk_total: int) -> str:
        if chunk_total <= self.exact_max_chunks:
            return "exact"
        return "iterative" if self.iterative else "hnsw"

    async def rescore(
        self,
        nearest: list[tuple[float, int]],
        texts: Sequence[str],
        query: npt.NDArray[np.float32],
        *,
        conn: Any = None,
        engine: AsyncEngine | None = None,
    ) -> tuple[list[tuple[float, int]], dict[int, int]]:
        """The vector side's candidates ((cosine, chunk id), best first, with their ``texts``)
        scored again with their best sentence: ``(1 - w) * the chunk's cosine + w * its
        closest sentence's``, best first, ties by id; and each one's rank before (by its
        cosine: ``fuse``'s ``cosine_ranks``). Only the candidates are rescored, so
        the memory and SQL plans (exact or HNSW) rank the same set alike; the whole KB scored
        so found 0.3 points more of squad-dev's hit@5 (docs/BENCHMARKS.md). A chunk without
        stored sentences, or without length (-inf here, NaN from pgvector), keeps its cosine
        and its place last."""
        assert self.sentences is not None
        best = await self.sentences.best(
            query, [(chunk_id, text) for (_, chunk_id), text in zip(nearest, texts, strict=True)],
            conn=conn, engine=engine,
        )  # fmt: skip
        w = self.sentence_weight
        mixed = [
            (sim if b is None or not math.isfinite(sim) else (1 - w) * sim + w * b, chunk_id)
            for (sim, chunk_id), b in zip(nearest, best, strict=True)
        ]
        mixed.sort(key=_lengthless_last)
        return mixed, {chunk_id: rank for rank, (_, chunk_id) in enumerate(nearest, 1)}

    async def search_sql(
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
        complete: bool = False,
        text_plan: str = "context",
    ) -> Retrieval:
        """The vector side in PostgreSQL, fused with ``text`` (ranked where ``text_plan``
        says): the chosen chunks, none of the ``hidden`` documents (``text`` has none
        either). Without a vector (provider down or too slow) BM25 alone answers.
        ``every()`` lists every candidate only when ``complete``: otherwise only the rows
        that can reach the top_k are read."""
        plan = self.plan(chunk_total)
        query = unit(vector) if vector is not None and self.sentences is not None else None
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
        )
        if hidden:
            args = (*args, list(hidden))
        statement = self.statement(
            plan, len(kb_ids), candidates=candidates, top_k=top_k, hidden=bool(hidden), complete=complete
        )
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
        by_id = {r["id"]: r for r in rows}
        nearest = [
            (float(r["similarity"]), r["id"])
            for r in sorted((r for r in rows if r["vector_rank"] is not None), key=_by_vector_rank)
        ]
        cosine_ranks = None
        if query is not None:
            texts = [by_id[i]["text"] for _, i in nearest]
            nearest, cosine_ranks = await self.rescore(nearest, texts, query, conn=conn)
        ranked = fuse(
            nearest,
            text,
            weight=float(self.vector_weight),
            k=self.rrf_k,
            cosine_ranks=cosine_ranks,
        )

        def chunk(f: Ranked) -> Candidate | None:
            r = by_id.get(f.chunk_id)
            if r is None or r["document_id"] is None:  # another model's, or not read in full
                return None
            return Candidate.ranked(f, r["document_id"], r["title"], r["section"], r["page"], r["text"])

        found = _chosen(ranked[:top_k], chunk)
        spent = (time.perf_counter() - t) * 1000
        return Retrieval(found, plan, vector_key != "-", spent, ranked, chunk, text_plan)

    async def search_memory(
        self,
        held: Sequence[KBVectors],
        *,
        text: TextHits,
        vector: Sequence[float] | None,
        candidates: int,
        top_k: int,
        hidden: frozenset[uuid.UUID] = frozenset(),
        text_plan: str = "context",
        started: float | None = None,
    ) -> Retrieval | None:
        """``search_sql``'s exact plan over KBs held in memory: its chunks in its order with
        its scores (but for near-ties of the vector side: see kb_vectors.py), none of the
        ``hidden`` documents, or None when the vector's size is not the copies' (the caller
        searches in SQL). Its time is counted from ``started`` (BM25's ranking included)."""
        t = time.perf_counter() if started is None else started
        nearest: list[tuple[float, int, KBVectors, int]] = []
        if vector is not None:
            if any(kb.matrix.shape[1] != len(vector) for kb in held if len(kb.ids)):
                return None
            query = unit(vector)
            for kb in held:
                sims = await kb.similarities(query)
                shown = kb.shown_rows(hidden)
                nearest.extend(
                    (sim, chunk_id, kb, at) for sim, chunk_id, at in kb.nearest(sims, candidates, shown)
                )
            if len(held) > 1:
                nearest.sort(key=nearest_first)
            del nearest[candidates:]
        where = {chunk_id: (kb, at) for _, chunk_id, kb, at in nearest}
        scored = [(sim, chunk_id) for sim, chunk_id, _, _ in nearest]
        cosine_ranks = None
        if vector is not None and self.sentences is not None:
            texts = [kb.texts[at] for _, _, kb, at in nearest]
            scored, cosine_ranks = await self.rescore(scored, texts, query, engine=self.engine)
        # A chunk without length ranked last as -inf; pgvector reports NaN, we report 0.
        ranked = fuse(
            [(sim if sim != -np.inf else 0.0, chunk_id) for sim, chunk_id in scored],
            text,
            weight=float(self.vector_weight),
            k=self.rrf_k,
            cosine_ranks=cosine_ranks,
        )

        def chunk(f: Ranked) -> Candidate | None:
            kb, row = where.get(f.chunk_id) or _locate(held, f.chunk_id)
            if kb is None:
                return None
            return Candidate.ranked(
                f, kb.document_ids[row], kb.titles[row], kb.sections[row], kb.pages[row], kb.texts[row]
            )

        found = _chosen(ranked[:top_k], chunk)
        spent = (time.perf_counter() - t) * 1000
        return Retrieval(found, "memory", vector is not None, spent, ranked, chunk, text_plan)


def unit(vector: Sequence[float]) -> npt.NDArray[np.float32]:
    """``vector`` as float32 of length 1 (as it is, when it has no length)."""
    query = np.asarray(vector, dtype=np.float32)
    norm = float(np.sqrt(np.einsum("i,i->", query, query)))  # no BLAS: see KBVectors.similarities
    return query / np.float32(norm) if norm > 0 else query


def _lengthless_last(item: tuple[float, int]) -> tuple[float, int]:
    """nearest_first, with NaN (pgvector's cosine of a chunk without length) last."""
    return (math.inf if math.isnan(item[0]) else -item[0], item[1])


def _locate(held: Sequence[KBVectors], chunk_id: int) -> tuple[KBVectors | None, int]:
    for h in held:
        row = h.position.get(chunk_id)
        if row is not None:
            return h, row
    return None, 0


def _by_vector_rank(row: Any) -> int:
    rank: int = row["vector_rank"]
    return rank
