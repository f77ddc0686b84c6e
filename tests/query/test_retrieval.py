"""The Retriever against the real database: each plan's statement runs, and the plan follows
the agent's size and the server's pgvector."""

import uuid

import pytest

from app.db.engine import raw_connection
from app.embeddings.lexical import LexicalEmbedder
from app.query.retrieval import Retriever
from app.query.service import normalise_question

QUESTION = "Which cards can I pay with?"


def test_the_plan_follows_the_agents_size_and_the_servers_pgvector():
    old = Retriever(dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=100, rrf_k=60)
    new = Retriever(dimensions=512, pgvector_version=(0, 8, 0), exact_max_chunks=100, rrf_k=60)
    assert [old.plan(100), old.plan(101)] == ["exact", "hnsw"]
    assert [new.plan(100), new.plan(101)] == ["exact", "iterative"]


@pytest.mark.parametrize(("exact_max_chunks", "plan"), [(20_000, "exact"), (0, "hnsw")])
async def test_each_plan_finds_the_kbs_chunks_fused_with_bm25(faq_agent, engine, exact_max_chunks, plan):
    """The test database has no HNSW index (too few chunks to build one), so the hnsw
    statement scans exactly too: both plans must rank the same chunks the same way."""
    embedder = LexicalEmbedder(512)
    retriever = Retriever(
        dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=exact_max_chunks, rrf_k=60
    )
    vector = await embedder.embed_query(normalise_question(QUESTION), timeout=1.0)
    kb_ids = [uuid.UUID(faq_agent["kb"]["id"])]
    async with raw_connection(engine) as conn:
        chunk_total = await conn.fetchval("SELECT count(*) FROM chunks WHERE kb_id = $1", kb_ids[0])
        common = {
            "kb_ids": kb_ids,
            "model_key": embedder.model_key,
            "chunk_total": chunk_total,
            "candidates": 30,
        }
        text = await retriever.bm25(
            conn, kb_ids=kb_ids, question=QUESTION, language="english", chunk_total=chunk_total, candidates=30
        )
        found = await retriever.fuse(conn, text=text, vector=vector, top_k=chunk_total, **common)
        # Without a vector (the provider failed) BM25 alone answers.
        text_only = await retriever.fuse(conn, text=text, vector=None, top_k=chunk_total, **common)

    assert chunk_total == 4
    assert (found.plan, found.embedded) == (plan, True)
    assert len(found.candidates) == chunk_total
    assert [c.vector_rank for c in sorted(found.candidates, key=lambda c: c.vector_rank)] == [1, 2, 3, 4]
    assert found.candidates[0].section == "Payments"
    assert (found.candidates[0].vector_rank, found.candidates[0].text_rank) == (1, 1)
    assert (text_only.plan, text_only.embedded) == (plan, False)
    assert [c.chunk_id for c in text_only.candidates] == text.ids
    assert all(c.vector_rank is None for c in text_only.candidates)
