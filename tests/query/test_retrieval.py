"""The Retriever against the real database: each plan's statement runs, and the plan follows
the agent's size and the server's pgvector."""

import uuid
from typing import Any

import numpy as np
import pytest

from app.answering.extractive import passage_sentences
from app.db.engine import raw_connection
from app.embeddings.lexical import LexicalEmbedder
from app.ingestion.repository import CACHE_PUT_SQL
from app.query import repository as sql
from app.query.retrieval import Ranked, Retriever, TextHits, fuse
from app.query.sentences import ChunkSentences, text_hash
from app.query.service import normalise_question

QUESTION = "Which cards can I pay with?"


def test_the_plan_follows_the_agents_size_and_the_servers_pgvector():
    old = Retriever(dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=100, rrf_k=60)
    new = Retriever(dimensions=512, pgvector_version=(0, 8, 0), exact_max_chunks=100, rrf_k=60)
    assert [old.plan(100), old.plan(101)] == ["exact", "hnsw"]
    assert [new.plan(100), new.plan(101)] == ["exact", "iterative"]


def test_the_fusion_adds_each_lists_weighted_reciprocal_rank():
    """One function ranks for every plan: chunk 11 is second by vector and first by text,
    12 second by text alone, 10 first by vector alone; with k = 1 and the vectors at half
    weight, both lists' say puts 11 first and BM25's second hit above the vectors' first."""
    ranked = fuse([(0.9, 10), (0.8, 11)], TextHits([11, 12], [5.0, 4.0]), weight=0.5, k=1)
    assert ranked == [
        Ranked(0.5 / 3 + 1 / 2, 2, 11, 1, 0.8, 5.0, cosine_rank=2),
        Ranked(1 / 3, None, 12, 2, None, 4.0, cosine_rank=None),
        Ranked(0.5 / 2, 1, 10, None, 0.9, None, cosine_rank=1),
    ]


def test_a_rescored_vector_list_keeps_each_hits_rank_by_its_own_cosine():
    """The best-sentence term reordered the vector list (11 first); the fusion ranks by that
    order and keeps the rank each hit had by its own vector, which the confidence reads."""
    ranked = fuse([(0.85, 11), (0.7, 10)], TextHits([], []), weight=1.0, k=1, cosine_ranks={10: 1, 11: 2})
    assert ranked == [
        Ranked(1 / 2, 1, 11, None, 0.85, None, cosine_rank=2),
        Ranked(1 / 3, 2, 10, None, 0.7, None, cosine_rank=1),
    ]


async def test_exact_and_hnsw_plans_find_and_rank_the_kbs_chunks_alike(faq_agent, engine):
    """Both statements run against the real database, fused with BM25. The app builds no
    HNSW index while all KBs together hold at most QUERY__EXACT_SEARCH_MAX_CHUNKS chunks, so
    the hnsw statement scans exactly here too: both plans must rank the same chunks alike."""
    embedder = LexicalEmbedder(512)
    vector = await embedder.embed_query(normalise_question(QUESTION), timeout=1.0)
    kb_ids = [uuid.UUID(faq_agent["kb"]["id"])]
    found, text_only = {}, {}
    async with raw_connection(engine) as conn:
        chunk_total = await conn.fetchval("SELECT count(*) FROM chunks WHERE kb_id = $1", kb_ids[0])
        common = {
            "kb_ids": kb_ids,
            "model_key": embedder.model_key,
            "chunk_total": chunk_total,
            "candidates": 30,
            "top_k": chunk_total,
        }
        for exact_max_chunks in (20_000, 0):
            retriever = Retriever(
                dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=exact_max_chunks, rrf_k=60
            )
            rows = await conn.fetch(
                sql.TEXT_SQL, kb_ids, ["english"] * len(kb_ids), QUESTION, chunk_total, 30, []
            )
            text = TextHits([r["id"] for r in rows], [r["rank"] for r in rows])
            plan = retriever.plan(chunk_total)
            found[plan] = await retriever.search_sql(conn, text=text, vector=vector, **common)
            # Without a vector (the provider failed) BM25 alone answers.
            text_only[plan] = await retriever.search_sql(conn, text=text, vector=None, **common)

    assert chunk_total == 4
    assert set(found) == {"exact", "hnsw"}
    for plan, result in found.items():
        assert (result.plan, result.embedded, len(result.candidates)) == (plan, True, chunk_total)
        assert sorted(c.vector_rank for c in result.candidates) == [1, 2, 3, 4]
        assert result.candidates[0].section == "Payments"
        assert (result.candidates[0].vector_rank, result.candidates[0].text_rank) == (1, 1)
        assert (text_only[plan].plan, text_only[plan].embedded) == (plan, False)
        assert [c.chunk_id for c in text_only[plan].candidates] == text.ids
        assert all(c.vector_rank is None for c in text_only[plan].candidates)
    assert found["hnsw"].candidates == found["exact"].candidates
    assert text_only["hnsw"].candidates == text_only["exact"].candidates


async def test_every_plan_rescores_its_candidates_by_their_best_sentence(faq_agent, engine):
    """With sentence vectors stored (as ingestion stores them for the offline default), the
    exact and HNSW plans score each candidate 0.5 x its cosine + 0.5 x its closest sentence's,
    alike, and keep the rank each had by its own vector."""
    embedder = LexicalEmbedder(512)
    kb_ids = [uuid.UUID(faq_agent["kb"]["id"])]
    async with raw_connection(engine) as conn:
        stored = await conn.fetch(
            "SELECT id, text, embedding::real[] AS e FROM chunks WHERE kb_id = $1 ORDER BY id", kb_ids[0]
        )
        sentences = {r["id"]: passage_sentences(r["text"]) for r in stored}
        texts = [t for ts in sentences.values() for t in ts]
        vectors = await embedder.embed_documents(texts)
        await conn.execute(
            CACHE_PUT_SQL,
            embedder.model_key,
            [text_hash(t) for t in texts],
            ["[" + ",".join(str(x) for x in v) + "]" for v in vectors],
        )
    vector = np.asarray(await embedder.embed_query(normalise_question(QUESTION), timeout=1.0))
    unit = vector / np.linalg.norm(vector)
    by_text = {t: np.asarray(v) / np.linalg.norm(v) for t, v in zip(texts, vectors, strict=True)}
    expected = {}
    for r in stored:
        cosine = float(np.asarray(r["e"]) @ unit / np.linalg.norm(r["e"]))
        expected[r["id"]] = 0.5 * cosine + 0.5 * max(float(by_text[t] @ unit) for t in sentences[r["id"]])
    found = {}
    async with raw_connection(engine) as conn:
        for exact_max_chunks in (20_000, 0):
            retriever = Retriever(
                dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=exact_max_chunks, rrf_k=60,
                sentences=ChunkSentences(embedder.model_key), sentence_weight=0.5,
            )  # fmt: skip
            found[retriever.plan(len(stored))] = await retriever.search_sql(
                conn, text=TextHits([], []), vector=vector.tolist(), kb_ids=kb_ids,
                model_key=embedder.model_key, chunk_total=len(stored), candidates=30, top_k=2,
            )  # fmt: skip
    assert set(found) == {"exact", "hnsw"}
    assert found["hnsw"].candidates == found["exact"].candidates
    best_first = sorted(expected, key=lambda i: -expected[i])
    candidates = found["exact"].candidates
    assert [c.chunk_id for c in candidates] == best_first[:2]
    assert [c.similarity for c in candidates] == pytest.approx(
        [expected[i] for i in best_first[:2]], abs=1e-5
    )
    assert [c.vector_rank for c in candidates] == [1, 2]
    by_cosine = sorted(stored, key=lambda r: -float(np.asarray(r["e"]) @ unit / np.linalg.norm(r["e"])))
    assert [c.cosine_rank for c in candidates] == [
        1 + [r["id"] for r in by_cosine].index(c.chunk_id) for c in candidates
    ]


async def test_exact_search_ranks_by_cosine_similarity(faq_agent, engine):
    """The exact plan's order and similarities are numpy's cosine over the stored vectors."""
    kb_ids = [uuid.UUID(faq_agent["kb"]["id"])]
    retriever = Retriever(dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=20_000, rrf_k=60)
    async with raw_connection(engine) as conn:
        stored = await conn.fetch(
            "SELECT id, embedding_model, embedding::real[] AS e FROM chunks WHERE kb_id = $1 ORDER BY id",
            kb_ids[0],
        )
        matrix = np.asarray([r["e"] for r in stored], dtype=np.float64)
        # A question close to every chunk by a different amount, nearest to the last one
        # written, so the cosine's order is not the ids' order.
        vector = np.asarray([1.0, 2.0, 3.0, 4.0]) @ matrix
        vector /= np.linalg.norm(vector)
        result = await retriever.search_sql(
            conn,
            text=TextHits([], []),
            vector=vector.tolist(),
            kb_ids=kb_ids,
            model_key=stored[0]["embedding_model"],
            chunk_total=len(stored),
            candidates=30,
            top_k=len(stored),
        )
    cosine = matrix @ vector / np.linalg.norm(matrix, axis=1)
    expected = sorted(zip([r["id"] for r in stored], cosine.tolist(), strict=True), key=lambda p: -p[1])
    assert (result.plan, len(stored)) == ("exact", 4)
    assert [i for i, _ in expected] != [r["id"] for r in stored]
    assert [c.chunk_id for c in result.candidates] == [i for i, _ in expected]
    assert [c.vector_rank for c in result.candidates] == [1, 2, 3, 4]
    assert [c.similarity for c in result.candidates] == pytest.approx([s for _, s in expected], abs=1e-6)


async def test_the_context_statement_carries_bm25_unless_a_cached_answer_is_served(faq_agent, engine):
    """AGENT_CONTEXT_SQL's BM25 list is TEXT_SQL's; with a cached answer it is not computed,
    unless asked for (debug mode)."""
    kb_id, agent_id = uuid.UUID(faq_agent["kb"]["id"]), uuid.UUID(faq_agent["agent"])
    question = (
        "Is the dental practice open on Saturdays, and where do I park?"  # every chunk matches, in order
    )

    async with raw_connection(engine) as conn:
        org_id = await conn.fetchval("SELECT org_id FROM knowledge_bases WHERE id = $1", kb_id)

        async def context(*, always: bool) -> Any:
            return await conn.fetchrow(
                sql.AGENT_CONTEXT_SQL,
                org_id,
                agent_id,
                "key",
                None,
                "default",
                question,
                30,
                always,
                "[]",
                [],
                False,
            )

        fresh = await context(always=False)
        rows = await conn.fetch(sql.TEXT_SQL, [kb_id], ["english"], question, fresh["chunk_total"], 30, [])
        await conn.execute(
            "INSERT INTO answer_cache (cache_key, org_id, agent_id, response, expires_at)"
            " VALUES ($1, $2, $3, '{}'::jsonb, now() + interval '1 hour')",
            fresh["cache_key"],
            org_id,
            agent_id,
        )
        cached = await context(always=False)
        debug = await context(always=True)

    assert (fresh["cached"], fresh["chunk_total"]) == (None, 4)
    assert len(rows) == 4
    assert list(fresh["text_ids"]) == [r["id"] for r in rows]
    # The same sums, added in whatever order each plan meets the postings.
    assert list(fresh["text_ranks"]) == pytest.approx([r["rank"] for r in rows], rel=1e-12)
    assert cached["cached"] is not None
    assert (cached["text_ids"], cached["text_ranks"]) == (None, None)
    assert list(debug["text_ids"]) == [r["id"] for r in rows]


@pytest.mark.parametrize("kbs", [1, 2])
async def test_a_generic_plan_of_the_exact_search_cannot_take_the_ann_index(faq_agent, engine, kbs):
    """The service lets PostgreSQL keep generic plans (app/db/engine.py). FIELD-NOTES' trap is
    a KB-filtered vector search whose generic plan walks the HNSW index and filters after,
    losing the agent's chunks: the exact statements (one KB, several) compare the plain
    column, which the expression index cannot serve, so even a forced generic plan reads the
    KB b-tree."""
    kb_ids = [faq_agent["kb"]["id"], str(uuid.uuid4())][:kbs]
    statement = Retriever(
        dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=10, rrf_k=60
    ).statement("exact", kbs, candidates=30, top_k=6)
    vector = "'{" + ",".join(["0.5"] * 512) + "}'::float4[]"
    kb_array = "ARRAY[" + ",".join(f"'{k}'" for k in kb_ids) + "]::uuid[]"
    args = f"{vector}, {kb_array}, 'm', 'm', '{{}}'::bigint[]"
    async with raw_connection(engine) as conn:
        await conn.execute(
            "CREATE INDEX ix_test_generic_hnsw ON chunks"
            " USING hnsw ((embedding::vector(512)) vector_cosine_ops) WHERE embedding_dim = 512"
        )
        try:
            await conn.execute(f"PREPARE test_generic_exact AS {statement}")
            await conn.execute("SET plan_cache_mode = force_generic_plan")
            # The test's KB is tiny: forbidding the other ways makes any usable index that
            # yields rows in distance order win (the hnsw statement's plan then takes it).
            await conn.execute("SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off")
            plan = "\n".join(r[0] for r in await conn.fetch(f"EXPLAIN EXECUTE test_generic_exact({args})"))
            prepared = await conn.fetch(
                "SELECT generic_plans FROM pg_prepared_statements WHERE name = $1", "test_generic_exact"
            )
        finally:
            await conn.execute("DEALLOCATE test_generic_exact")
            await conn.execute("RESET plan_cache_mode")
            await conn.execute("RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_sort")
            await conn.execute("DROP INDEX ix_test_generic_hnsw")

    assert prepared[0]["generic_plans"] == 1
    assert "ix_chunks_kb" in plan
    assert "hnsw" not in plan
