"""The Retriever against the real database: the vector side searched inside the fused
statement, or beforehand on a connection of its own, gives the same chunks."""

import uuid

import pytest

from app.db.engine import raw_connection
from app.embeddings.lexical import LexicalEmbedder
from app.query.retrieval import Retriever
from app.query.service import normalise_question

QUESTION = "Which cards can I pay with?"


@pytest.mark.parametrize(("exact_max_chunks", "plan"), [(20_000, "exact"), (0, "hnsw")])
async def test_vector_search_apart_fuses_like_the_single_statement(faq_agent, engine, exact_max_chunks, plan):
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
        hits = await retriever.vector_search(conn, vector=vector, **common)
        together = await retriever.fuse(conn, text=text, vector=vector, top_k=3, **common)
        apart = await retriever.fuse(conn, text=text, vector=hits, top_k=3, **common)
        # Without a vector (the provider failed) BM25 alone answers, either way.
        nothing = await retriever.vector_search(conn, vector=None, **common)
        text_only = await retriever.fuse(conn, text=text, vector=None, top_k=3, **common)
        text_only_apart = await retriever.fuse(conn, text=text, vector=nothing, top_k=3, **common)

    assert chunk_total > 3
    assert (hits.plan, hits.embedded, len(hits.ids)) == (plan, True, chunk_total)
    assert hits.distances == sorted(hits.distances)
    assert (together.plan, apart.plan, together.embedded, apart.embedded) == (plan, plan, True, True)
    assert len(together.candidates) == 3
    assert apart.candidates == together.candidates
    assert together.candidates[0].section == "Payments"
    assert {c.chunk_id for c in together.candidates} & set(hits.ids[:3])
    assert all(c.vector_rank is not None for c in together.candidates)

    assert (nothing.ids, nothing.embedded) == ([], False)
    assert (text_only.embedded, text_only_apart.embedded) == (False, False)
    assert text_only_apart.candidates == text_only.candidates
    assert [c.chunk_id for c in text_only.candidates] == text.ids[:3]
    assert all(c.vector_rank is None for c in text_only.candidates)
