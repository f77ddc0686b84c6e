"""KBs held in memory (app/query/kb_vectors.py): the in-memory search ranks exactly as the
SQL exact plan does, a copy is used only at the content version just read, and the cache
stays within its budget and out of the way when it cannot help."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import itertools
import json
import logging
import uuid
from typing import Any

import numpy as np
import pytest

from app.answering.extractive import passage_sentences
from app.db.engine import raw_connection
from app.ingestion.repository import CACHE_PUT_SQL
from app.query import repository as sql
from app.query.filters import QueryFilters, to_clauses
from app.query.kb_vectors import KBVectorCache, KBVectors, Postings
from app.query.retrieval import Candidate, Retriever, TextHits, rank_text
from app.query.sentences import ChunkSentences, text_hash
from tests.helpers import assign_new_agent, create_kb, create_text_doc, sample, served
from tests.query.conftest import FAQ

MODEL = "lexical-v1:512"
WORDS = [
    "parking",
    "invoice",
    "refund",
    "dentist",
    "crown",
    "filling",
    "whitening",
    "appointment",
    "insurance",
    "card",
    "cash",
    "saturday",
    "emergency",
    "implant",
    "braces",
    "cleaning",
    "xray",
    "fee",
    "deposit",
    "cancel",
    "reschedule",
    "children",
    "anaesthetic",
    "gum",
    "root",
    "canal",
    "bridge",
    "denture",
    "hygienist",
    "receipt",
]


async def seed_chunks(
    engine: Any,
    org_id: Any,
    kb_id: str,
    doc_id: str,
    vectors: np.ndarray,
    texts: list[str],
    model: str = MODEL,
    language: str = "english",
    lengths: list[int] | None = None,
) -> list[int]:
    """Chunks with the given vectors and texts (of 40 tokens each, or ``lengths``); the
    database's triggers move the KB's count and version (migration 0009) and write its BM25
    postings (0004), as for ingestion's writes."""
    async with raw_connection(engine) as conn, conn.transaction():
        ids = await conn.fetch(
            """
            INSERT INTO chunks (org_id, kb_id, document_id, ordinal, text, section, page, token_count,
                                embedding_model, embedding_dim, embedding, tsv)
            SELECT $1, $2, $3, u.n, u.t, 'Section ' || u.n, u.n % 7, u.l, $4, $5, u.e::vector,
                   to_tsvector($9::regconfig, u.t)
            FROM unnest($6::text[], $7::text[], $8::int[]) WITH ORDINALITY AS u(t, e, l, n)
            RETURNING id
            """,
            org_id,
            uuid.UUID(kb_id),
            uuid.UUID(doc_id),
            model,
            vectors.shape[1],
            texts,
            ["[" + ",".join(f"{x:.6f}" for x in v) + "]" for v in vectors],
            lengths or [40] * len(texts),
            language,
        )
    return [r["id"] for r in ids]


async def random_kb(client, org, engine, rng, n: int, title: str) -> tuple[str, list[int], np.ndarray]:
    kb = await create_kb(client, org.headers, title)
    doc = await create_text_doc(client, org.headers, kb["id"], title=f"{title} doc")
    # Vectors of different lengths: cosine does not care, and the copy must not either.
    vectors = rng.standard_normal((n, 512)) * rng.uniform(0.5, 3.0, (n, 1))
    texts = [" ".join(rng.choice(WORDS, 12)) for _ in range(n)]
    ids = await seed_chunks(engine, org.id, kb["id"], doc["id"], vectors, texts)
    return kb["id"], ids, vectors


def _fields(c: Candidate) -> tuple[Any, ...]:
    return (
        c.chunk_id,
        c.vector_rank,
        c.cosine_rank,
        c.text_rank,
        c.score,
        c.text_score,
        c.document_id,
        c.title,
        c.section,
        c.page,
        c.text,
    )


async def seed_sentences(engine: Any, rng: Any, texts: list[str], near: np.ndarray) -> None:
    """Stored sentence vectors (as ingestion writes them) for ``texts``' sentences, each near
    its chunk's vector in ``near`` (a row per text)."""
    pairs = {
        text_hash(sentence): near[i] + rng.standard_normal(near.shape[1]) * 2
        for i, text in enumerate(texts)
        for sentence in passage_sentences(text)
    }
    async with raw_connection(engine) as conn:
        await conn.execute(
            CACHE_PUT_SQL,
            MODEL,
            list(pairs),
            ["[" + ",".join(f"{x:.6f}" for x in v) + "]" for v in pairs.values()],
        )


@pytest.mark.parametrize(("weight", "sentence_weight"), [(1.0, 0.0), (0.5, 0.0), (0.0, 0.0), (0.8, 0.5)])
async def test_memory_and_sql_rank_the_same_chunks_alike(client, org, engine, weight, sentence_weight):
    """Two KBs of random vectors and word soup, 24 questions (vectors near a chunk, far from
    all, and none at all): the in-memory search returns the SQL plan's candidates, in its order,
    with its scores, for one KB and for both. The SQL statement reads in full only the rows
    that can reach the top_k; reading all of them (``complete``) chooses the same chunks, and
    lists every candidate as the memory search does. With the best-sentence term, four in five
    chunks have stored sentence vectors, and both paths rescore alike."""
    rng = np.random.default_rng(7)
    kb_a, ids_a, vectors_a = await random_kb(client, org, engine, rng, 300, "A")
    kb_b, _ids_b, _ = await random_kb(client, org, engine, rng, 120, "B")
    if sentence_weight:
        async with raw_connection(engine) as conn:
            rows = await conn.fetch(
                "SELECT id, text FROM chunks WHERE kb_id = $1 ORDER BY id", uuid.UUID(kb_a)
            )
        with_sentences = [i for i, r in enumerate(rows) if r["id"] % 5]
        await seed_sentences(
            engine, rng, [rows[i]["text"] for i in with_sentences], vectors_a[with_sentences]
        )
    # Chunks of another embedding model (a KB being re-embedded): BM25 finds them (chunk_terms
    # knows no model), and both paths must drop them.
    other = await create_text_doc(client, org.headers, kb_a, title="Other model", content="Re-embedded.")
    await seed_chunks(
        engine, org.id, kb_a, other["id"], rng.standard_normal((40, 512)),
        [" ".join(rng.choice(WORDS, 12)) for _ in range(40)], model="m2",
    )  # fmt: skip
    cache = KBVectorCache(engine, model_key=MODEL, budget_bytes=64 * 1024 * 1024)
    held = {kb: await cache.load(org.id, uuid.UUID(kb)) for kb in (kb_a, kb_b)}
    assert all(h is not None for h in held.values())
    retriever = Retriever(
        dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=20_000, rrf_k=60, vector_weight=weight,
        engine=engine, sentences=ChunkSentences(MODEL), sentence_weight=sentence_weight,
    )  # fmt: skip
    plain = Retriever(
        dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=20_000, rrf_k=60, vector_weight=weight
    )
    compared = dropped = read_in_full = listed = reordered = 0
    async with raw_connection(engine) as conn:
        for q in range(24):
            question = " ".join(rng.choice(WORDS, 4))
            if q % 3 == 0:
                vector: list[float] | None = None
            elif q % 3 == 1:
                vector = (vectors_a[q * 7] + rng.standard_normal(512) * 0.3).tolist()
            else:
                vector = rng.standard_normal(512).tolist()
            for kbs in ([kb_a], [kb_a, kb_b]):
                kb_ids = sorted(uuid.UUID(k) for k in kbs)
                total = 300 if len(kbs) == 1 else 420
                rows = await conn.fetch(
                    sql.TEXT_SQL, kb_ids, ["english"] * len(kb_ids), question, total, 30, []
                )
                text = TextHits([r["id"] for r in rows], [r["rank"] for r in rows])
                dropped += len(set(text.ids) - set(ids_a) - set(_ids_b))
                search = {
                    "text": text,
                    "vector": vector,
                    "kb_ids": kb_ids,
                    "model_key": MODEL,
                    "chunk_total": total,
                    "candidates": 30,
                    "top_k": 12,
                }
                in_sql = await retriever.search_sql(conn, **search)
                copies = [held[str(k)] for k in kb_ids]
                in_memory = await retriever.search_memory(
                    [c for c in copies if c is not None], text=text, vector=vector, candidates=30, top_k=12
                )
                assert in_memory is not None
                unscored = await plain.search_memory(
                    [c for c in copies if c is not None], text=text, vector=vector, candidates=30, top_k=12
                )
                assert unscored is not None
                reordered += [c.chunk_id for c in unscored.every()] != [c.chunk_id for c in in_memory.every()]
                assert (in_sql.plan, in_memory.plan) == ("exact", "memory")
                assert in_memory.embedded is in_sql.embedded is (vector is not None)
                assert [_fields(c) for c in in_memory.candidates] == [_fields(c) for c in in_sql.candidates]
                assert [c.similarity for c in in_memory.candidates] == pytest.approx(
                    [c.similarity for c in in_sql.candidates], abs=1e-6
                )
                compared += len(in_sql.candidates)
                in_full = await retriever.search_sql(conn, **search, complete=True)
                assert [_fields(c) for c in in_full.candidates] == [_fields(c) for c in in_sql.candidates]
                assert [_fields(c) for c in in_full.every()] == [_fields(c) for c in in_memory.every()]
                assert {c.chunk_id for c in in_sql.every()} <= {c.chunk_id for c in in_full.every()}
                read_in_full += len(in_sql.every())
                listed += len(in_full.every())
    # The comparison covered most of 12 chunks a question (a list is shorter by the other
    # model's chunks that BM25 put in it, in both paths alike).
    assert compared > 24 * 2 * 10
    assert dropped > 0  # other-model chunks did reach BM25's lists
    if sentence_weight:
        # Every vector candidate is read in full (any may move up), BM25's beyond the top_k
        # not; and the sentences did move the vector side's order.
        assert listed / 2 < read_in_full < listed
        assert reordered > 0
    else:
        assert read_in_full < listed / 2  # most rows beyond the top_k were never read in full (923 of 2,213)
        assert reordered == 0
    assert set(ids_a) <= set(held[kb_a].ids.tolist())


ENGLISH = [*WORDS, "parkings", "invoices", "refunds", "mornings", "morning", "horse", "horses", "the", "of"]
FRENCH = ["cheval", "chevaux", "matin", "matins", "facture", "remboursement", "dentiste", "samedi", "urgence"]


async def test_bm25_over_the_copies_ranks_as_the_context_statement(client, org, engine):
    """An agent reading an English KB (with chunks of another embedding model, a document its
    filter hides, and a posting whose chunk was deleted behind the triggers' back) and a
    French one. For 40 questions, without and with the filter: BM25 over the copies'
    postings (``rank_text``, with the lexemes the context statement returns when it leaves
    BM25 to them) lists the statement's own ids in its order with its scores, and so does
    TEXT_SQL, the statement a call falls back on."""
    rng = np.random.default_rng(12)
    kb_en = (await create_kb(client, org.headers, "English"))["id"]
    kb_fr = (await create_kb(client, org.headers, "French", language="french"))["id"]
    current = await create_text_doc(client, org.headers, kb_en, title="Current", tags=["current"])
    old = await create_text_doc(client, org.headers, kb_en, "Last year's.", title="Old", tags=["old"])
    renewed = await create_text_doc(client, org.headers, kb_en, "Re-embedded.", title="New", tags=["current"])
    french = await create_text_doc(client, org.headers, kb_fr, title="Français", tags=["current"])

    async def seed(kb: str, doc: str, words: list[str], n: int, **extra: Any) -> list[int]:
        lengths = rng.integers(3, 30, n).tolist()
        texts = [" ".join(rng.choice(words, k)) for k in lengths]
        return await seed_chunks(
            engine, org.id, kb, doc, rng.standard_normal((n, 512)), texts, lengths=lengths, **extra
        )

    english = await seed(kb_en, current["id"], ENGLISH, 200)
    hidden = await seed(kb_en, old["id"], ENGLISH, 60)
    other_model = await seed(kb_en, renewed["id"], ENGLISH, 30, model="m2")
    in_french = await seed(kb_fr, french["id"], FRENCH, 80, language="french")
    orphan = english[5]
    async with raw_connection(engine) as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")  # its postings stay
        await conn.execute("DELETE FROM chunks WHERE id = $1", orphan)
    agent = await assign_new_agent(client, org.headers, kb_en)
    r = await client.put(f"/api/knowledge/{kb_fr}/agents", json={"agent_ids": [agent]}, headers=org.headers)
    assert r.status_code == 200, r.text
    cache = KBVectorCache(engine, model_key=MODEL, budget_bytes=64 * 1024 * 1024)
    copies = [await cache.load(org.id, uuid.UUID(kb)) for kb in sorted((kb_en, kb_fr), key=uuid.UUID)]
    assert all(c is not None and c.postings is not None for c in copies)
    retriever = Retriever(dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=20_000, rrf_k=60)
    only_current = json.dumps(to_clauses(QueryFilters.model_validate({"tags": {"any": ["current"]}})))

    listed: set[int] = set()
    compared = 0
    async with raw_connection(engine) as conn:
        for q in range(40):
            question = " ".join([*rng.choice(ENGLISH, 3), *rng.choice(FRENCH, q % 3)])
            for clauses, limit in itertools.product(("[]", only_current), (500, 30)):
                args = (
                    org.id,
                    uuid.UUID(agent),
                    f"key {q}",
                    None,
                    "default",
                    question,
                    limit,
                    False,
                    clauses,
                    [],
                )
                in_sql = await conn.fetchrow(sql.AGENT_CONTEXT_SQL, *args, False)
                left = await conn.fetchrow(sql.AGENT_CONTEXT_SQL, *args, True)
                assert (in_sql["question_terms"], left["text_ids"]) == (None, None)
                assert left["hidden_documents"] == in_sql["hidden_documents"]
                corpus = retriever.corpus(org.id, uuid.UUID(agent), question, left)
                assert corpus.text is None
                in_memory = rank_text(
                    [c for c in copies if c is not None],
                    corpus.terms,
                    total=corpus.chunk_total,
                    hidden=frozenset(corpus.hidden),
                    limit=limit,
                )
                fallback = await conn.fetch(
                    sql.TEXT_SQL,
                    corpus.kb_ids,
                    corpus.languages,
                    question,
                    corpus.chunk_total,
                    limit,
                    corpus.hidden,
                )
                ids, ranks = list(in_sql["text_ids"] or []), list(in_sql["text_ranks"] or [])
                assert in_memory.scores == pytest.approx(ranks, rel=1e-12)
                # The same chunks in the same order, but for chunks whose scores tie (the same
                # terms as often, in chunks as long): PostgreSQL's sums of a chunk's terms,
                # in whichever order its plan meets them, may differ in the last bit, and
                # its order of such a tie is arbitrary; in memory it is by id. A tie cut by
                # the limit may keep other members.
                memory_ties, sql_ties = _ties(in_memory.ids, in_memory.scores), _ties(ids, ranks)
                fallback_ties = _ties([r["id"] for r in fallback], [r["rank"] for r in fallback])
                if limit == 30:
                    memory_ties, sql_ties, fallback_ties = memory_ties[:-1], sql_ties[:-1], fallback_ties[:-1]
                assert memory_ties == sql_ties == fallback_ties
                if clauses != "[]":
                    assert not set(ids) & set(hidden)
                listed |= set(ids)
                compared += len(ids)
    assert corpus.languages == ["english" if str(k) == kb_en else "french" for k in corpus.kb_ids]
    assert compared > 40 * 2 * (30 + 50)
    # Every kind of posting took part: French chunks, the hidden document's (without the
    # filter), another model's, the deleted chunk's.
    assert orphan in listed
    assert listed & set(hidden)
    assert listed & set(other_model)
    assert listed & set(in_french)


def test_a_term_is_told_from_another_of_the_same_hash():
    """Terms are looked up by their str hash, their text telling a collision apart: "parking"
    stored under the hash of "invoice" (as if they collided) is not "invoice"'s, which is
    found past it, and a term no chunk holds has no postings."""
    rows = [
        {"term": t, "n": len(ids), "ids": b"".join(i.to_bytes(8, "big") for i in ids),
         "tfs": b"".join((1).to_bytes(4, "big") for _ in ids), "dls": b"".join((9).to_bytes(4, "big") for _ in ids)}
        for t, ids in (("invoice", [3]), ("parking", [1, 2]))
    ]  # fmt: skip
    chunks = [{"id": i, "document_id": uuid.UUID(int=i)} for i in (1, 2, 3)]
    postings = Postings.from_rows("english", rows, chunks)

    def chunks_of(p: Postings, term: str) -> list[int] | None:
        span = p.span(term)
        return None if span is None else p.ids[p.slots[span[0] : span[1]]].tolist()

    assert [chunks_of(postings, t) for t in ("invoice", "parking", "refund")] == [[3], [1, 2], None]
    collided = dataclasses.replace(
        postings,
        hashes=np.array([hash("invoice")] * 2, dtype=np.int64),
        text=b"parkinginvoice",
        offsets=np.array([0, 7, 14], dtype=np.int32),
        starts=np.array([0, 2, 3], dtype=np.int32),
        slots=np.array([0, 1, 2], dtype=np.int32),
    )
    assert [chunks_of(collided, t) for t in ("invoice", "parking")] == [[3], None]


def _ties(ids: list[int], scores: list[float]) -> list[frozenset[int]]:
    """The ids, best first, grouped with the ids whose scores equal theirs to 1e-12."""
    groups: list[list[int]] = []
    first = 0.0
    for chunk_id, score in zip(ids, scores, strict=True):
        if groups and score == pytest.approx(first, rel=1e-12):
            groups[-1].append(chunk_id)
        else:
            groups.append([chunk_id])
            first = score
    return [frozenset(g) for g in groups]


async def test_ties_at_the_cut_are_broken_by_id_as_in_sql():
    """Fifty chunks exactly as near as each other (one-hot vectors: every dot product is
    exact in any order of summation): the ten returned are the ten smallest ids."""
    n = 60
    ids = np.arange(1000, 1000 + n)[::-1].copy()  # stored in descending id order
    matrix = np.zeros((n, 8), dtype=np.float32)
    matrix[:50, 0] = 1.0
    matrix[50:, 1] = 1.0
    copy = _copy(ids, matrix)
    query = np.zeros(8, dtype=np.float32)
    query[0] = 1.0
    nearest = copy.nearest(await copy.similarities(query), 10)
    assert [chunk_id for _, chunk_id, _ in nearest] == sorted(ids[:50].tolist())[:10]
    assert {sim for sim, _, _ in nearest} == {1.0}


async def test_a_chunk_without_length_ranks_last_across_kbs():
    """pgvector ranks a zero vector's NaN distance after every other; so does the search,
    also below a negative similarity in another KB."""
    retriever = Retriever(dimensions=2, pgvector_version=(0, 6, 2), exact_max_chunks=10, rrf_k=60)
    zero = _copy(np.asarray([1, 2]), np.asarray([[0, 0], [0, 1]], dtype=np.float32))
    opposite = _copy(np.asarray([3]), np.asarray([[0, -1]], dtype=np.float32))
    found = await retriever.search_memory(
        [zero, opposite], text=TextHits([], []), vector=[0.0, 1.0], candidates=3, top_k=3
    )
    assert found is not None
    assert [(c.chunk_id, c.vector_rank, c.similarity) for c in found.candidates] == [
        (2, 1, 1.0),
        (3, 2, -1.0),
        (1, 3, 0.0),
    ]


async def test_equal_contributions_of_a_vector_and_a_text_rank_put_the_vector_hit_first(client, org, engine):
    """The fusion orders by score, then vector rank (none last), then id: with weight 1, vector rank
    1 and text rank 1 score the same, and the vector's hit comes first, in SQL and in memory.
    k = 568 makes k + 1 = 569, where numeric 1.0 / 569 rounds above float8's 1 / 569: with the
    text side in numeric, SQL put the text hit first."""
    rng = np.random.default_rng(11)
    kb, ids, vectors = await random_kb(client, org, engine, rng, 2, "A")
    retriever = Retriever(dimensions=512, pgvector_version=(0, 6, 2), exact_max_chunks=10, rrf_k=568)
    copy = await KBVectorCache(engine, model_key=MODEL, budget_bytes=1 << 26).load(org.id, uuid.UUID(kb))
    assert copy is not None
    # The vector's hit has the larger id: the tie is broken by the vector rank, not the id.
    args: dict[str, Any] = {"text": TextHits([ids[0]], [3.0]), "vector": vectors[1].tolist(), "top_k": 2}
    in_memory = await retriever.search_memory([copy], candidates=1, **args)
    async with raw_connection(engine) as conn:
        in_sql = await retriever.search_sql(
            conn, kb_ids=[uuid.UUID(kb)], model_key=MODEL, chunk_total=2, candidates=1, **args
        )
    assert in_memory is not None
    assert ids[1] > ids[0]
    expected = [(ids[1], 1, None, 1 / 569), (ids[0], None, 1, 1 / 569)]
    for found in (in_sql, in_memory):
        assert [(c.chunk_id, c.vector_rank, c.text_rank, c.score) for c in found.candidates] == expected


async def test_a_vector_of_another_size_is_searched_in_sql():
    copy = _copy(np.asarray([1]), np.asarray([[1, 0]], dtype=np.float32))
    retriever = Retriever(dimensions=2, pgvector_version=(0, 6, 2), exact_max_chunks=10, rrf_k=60)
    found = await retriever.search_memory(
        [copy], text=TextHits([], []), vector=[1.0, 0, 0], candidates=5, top_k=5
    )
    assert found is None


async def test_a_large_copy_is_compared_in_blocks_with_the_same_result():
    """Above a million values the similarities are computed in blocks, yielding to the
    event loop between them: the same values as in one piece."""
    rng = np.random.default_rng(2)
    n, dim = 3000, 512  # 1.5 million values: two blocks
    copy = _copy(np.arange(n), rng.standard_normal((n, dim)).astype(np.float32))
    query = rng.standard_normal(dim).astype(np.float32)
    query /= np.linalg.norm(query)
    yields = 0

    async def count_yields() -> None:
        nonlocal yields
        while True:
            await asyncio.sleep(0)
            yields += 1

    counter = asyncio.ensure_future(count_yields())
    await asyncio.sleep(0)
    before = yields
    sims = await copy.similarities(query)
    during = yields - before
    counter.cancel()
    assert np.allclose(sims, copy.matrix @ query, atol=1e-5)
    assert during >= 2


def _copy(ids: np.ndarray, matrix: np.ndarray) -> KBVectors:
    n = len(ids)
    rows = [
        {
            "version": 1,
            "changed": None,
            "id": int(i),
            "v": len(m).to_bytes(2, "big") + b"\0\0" + m.astype(">f4").tobytes(),
            "document_id": uuid.UUID(int=1),
            "title": "T",
            "section": None,
            "page": None,
            "text": f"chunk {i}",
        }
        for i, m in zip(ids.tolist(), matrix, strict=True)
    ]
    copy = KBVectors.from_rows(uuid.UUID(int=2), rows)
    assert (len(copy.ids), copy.stamp) == (n, (1, None))
    return copy


async def test_a_copy_holds_its_versions_chunks_of_the_model_in_use_and_nothing_foreign(
    client, org, other_org, engine
):
    rng = np.random.default_rng(3)
    kb, ids, vectors = await random_kb(client, org, engine, rng, 20, "A")
    doc = await create_text_doc(client, org.headers, kb, content="Re-embedded text.", title="Other model")
    # Chunks of another embedding model (a KB being re-embedded) are not searched.
    await seed_chunks(engine, org.id, kb, doc["id"], rng.standard_normal((3, 256)), ["x y z"] * 3, model="m2")
    cache = KBVectorCache(engine, model_key=MODEL, budget_bytes=64 * 1024 * 1024)
    copy = await cache.load(org.id, uuid.UUID(kb))
    assert copy is not None
    assert copy.ids.tolist() == sorted(ids)
    version, _ = await _stamp(engine, kb)
    assert copy.stamp[0] == version == 2
    expected = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    order = np.argsort(ids)
    assert np.allclose(copy.matrix, expected[order], atol=1e-5)
    assert copy.titles == ["A doc"] * 20
    assert cache.held() == {uuid.UUID(kb): 2}
    # Another organisation cannot load it, whatever id it names.
    foreign = KBVectorCache(engine, model_key=MODEL, budget_bytes=64 * 1024 * 1024)
    assert await foreign.load(other_org.id, uuid.UUID(kb)) is None
    assert foreign.held() == {}


async def test_the_budget_bounds_what_is_held(client, org, engine):
    rng = np.random.default_rng(5)
    kbs = [uuid.UUID((await random_kb(client, org, engine, rng, 50, t))[0]) for t in ("A", "B", "C")]
    stamps = {kb: await _stamp(engine, kb) for kb in kbs}
    probe = KBVectorCache(engine, model_key=MODEL, budget_bytes=64 * 1024 * 1024)
    size = (await probe.load(org.id, kbs[0])).nbytes  # type: ignore[union-attr]
    # Room for two copies. Both in use: a third is not let in (it is searched in PostgreSQL)
    # rather than the two being pushed out and loaded again in turn.
    cache = KBVectorCache(engine, model_key=MODEL, budget_bytes=2 * size + size // 2, reload_interval_s=0)
    for kb in kbs[:2]:
        await cache.load(org.id, kb)
    assert await cache.load(org.id, kbs[2]) is None
    assert set(cache.held()) == set(kbs[:2])
    # Once the copies have not been used for keep_used_s, the least recently used one goes.
    cache.keep_used_s = 0
    assert _lookup(cache, org.id, kbs[0], stamps) is not None  # A used last
    assert await cache.load(org.id, kbs[2]) is not None
    assert set(cache.held()) == {kbs[0], kbs[2]}
    assert cache.held_bytes <= cache.budget_bytes
    # A KB larger than the whole budget is not held, and not read again until it changes.
    tiny = KBVectorCache(
        engine, model_key=MODEL, budget_bytes=size // 2, reload_interval_s=0, reload_factor=0
    )
    for _ in range(3):
        assert _lookup(tiny, org.id, kbs[0], stamps) is None
        await tiny.settle()
    assert (tiny.held(), tiny.loads) == ({}, 1)
    # Off: nothing is loaded at all.
    off = KBVectorCache(engine, model_key=MODEL, budget_bytes=0)
    assert _lookup(off, org.id, kbs[0], stamps) is None
    await off.settle()
    assert (off.held(), off.loads) == ({}, 0)


async def test_only_the_missing_kbs_load_and_nothing_after_close(client, org, engine):
    rng = np.random.default_rng(6)
    kbs = [uuid.UUID((await random_kb(client, org, engine, rng, 10, t))[0]) for t in ("A", "B")]
    stamps = {kb: await _stamp(engine, kb) for kb in kbs}
    cache = KBVectorCache(engine, model_key=MODEL, budget_bytes=1 << 26, reload_interval_s=3600)
    await cache.load(org.id, kbs[0])
    both = (kbs, [stamps[k][0] for k in kbs], [stamps[k][1] for k in kbs])
    # One of the agent's two KBs is held: the call goes to PostgreSQL, only the other loads.
    assert cache.lookup(org.id, *both) is None
    assert set(cache._loading) == {kbs[1]}
    await cache.settle()
    assert len(cache.lookup(org.id, *both) or []) == 2
    # A KB changed right after its load waits reload_interval_s before it is read again.
    newer = (kbs, [stamps[kbs[0]][0] + 1, stamps[kbs[1]][0]], [stamps[k][1] for k in kbs])
    assert cache.lookup(org.id, *newer) is None
    assert cache._loading == {}
    # After close, nothing new is started (a KB never asked about would otherwise load).
    await cache.close()
    unseen = uuid.UUID((await random_kb(client, org, engine, rng, 3, "C"))[0])
    assert cache.lookup(org.id, [unseen], [1], [stamps[kbs[0]][1]]) is None
    assert (cache._loading, cache.loads) == ({}, 2)


async def test_a_copy_is_keyed_by_the_time_of_change_too_and_refreshed_when_old(client, org, engine):
    """After a failover that lost commits, or a restore, a KB's version number can come back
    for other content: the copy is used only at the same number and change time. A copy in
    use is also reloaded after max_age_s, so a change made behind the triggers' back (a writer
    that disables them, as a restore with --disable-triggers does: no version bump) is seen."""
    rng = np.random.default_rng(8)
    kb = uuid.UUID((await random_kb(client, org, engine, rng, 10, "A"))[0])
    cache = KBVectorCache(engine, model_key=MODEL, budget_bytes=1 << 26, reload_interval_s=0, reload_factor=0)
    held = await cache.load(org.id, kb)
    assert held is not None
    version, changed = await _stamp(engine, kb)
    assert held.stamp == (version, changed)
    assert cache.lookup(org.id, [kb], [version], [changed + dt.timedelta(microseconds=1)]) is None
    await cache.settle()
    # A chunk deleted with the triggers off, the version untouched: served until the copy is old...
    gone = int(held.ids[0])
    async with raw_connection(engine) as conn, conn.transaction():
        await conn.execute("SET LOCAL session_replication_role = replica")
        await conn.execute("DELETE FROM chunks WHERE id = $1", gone)
    assert await _stamp(engine, kb) == (version, changed)
    copy = cache.lookup(org.id, [kb], [version], [changed])
    assert copy is not None
    assert gone in copy[0].position
    # ...then used once more while it is reloaded behind the call, and gone after.
    cache.max_age_s = 0
    assert cache.lookup(org.id, [kb], [version], [changed]) is not None
    await cache.settle()
    copy = cache.lookup(org.id, [kb], [version], [changed])
    assert copy is not None
    assert gone not in copy[0].position


def _lookup(cache: KBVectorCache, org_id: Any, kb: uuid.UUID, stamps: dict[Any, Any]) -> Any:
    version, changed = stamps[kb]
    return cache.lookup(org_id, [kb], [version], [changed])


async def _stamp(engine: Any, kb: Any) -> tuple[int, dt.datetime]:
    async with raw_connection(engine) as conn:
        row = await conn.fetchrow(
            "SELECT content_version, coalesce(updated_at, created_at) AS at FROM knowledge_bases WHERE id = $1",
            uuid.UUID(str(kb)),
        )
    return int(row["content_version"]), row["at"]


# ---------------------------------------------------------------------------------------------
# Through the service: the app runs in the test's loop (served), so its background loads can
# be awaited and every outcome below is deterministic.


async def _ask(client, headers, agent, question) -> dict[str, Any]:
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge",
        json={"query": question},
        headers=headers,
        params={"debug": "true"},
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _ranked(body: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (c["chunk_id"], c["vector_rank"], c["text_rank"], c["score"], c["title"], c["text"])
        for c in body["debug"]["candidates"]
    ]


async def test_the_service_searches_a_held_copy_only_at_the_version_just_read(app, org, drain_queue, caplog):
    async with served(app) as client:
        cache: KBVectorCache = app.state.query_service.kb_vectors
        cache.reload_interval_s = cache.reload_factor = 0
        kb = await create_kb(client, org.headers, "Dental FAQ")
        faq = await create_text_doc(client, org.headers, kb["id"], title="Practice FAQ", content=FAQ)
        agent = await assign_new_agent(client, org.headers, kb["id"])
        assert await drain_queue() == {"ready": 1}
        question = "Where can I park?"

        plans = "vk_query_search_plans_total"
        before = (await client.get("/metrics")).text
        # First call: nothing held yet, PostgreSQL searches; the copy loads behind it.
        first = await _ask(client, org.headers, agent, question)
        assert (first["debug"]["plan"], first["debug"]["text_plan"]) == ("exact", "context")
        await cache.settle()
        assert cache.held() == {uuid.UUID(kb["id"]): 1}
        # The second searches the copy's vectors; BM25 was ranked in the context statement,
        # which could not know the copy was there. From the third on, BM25 is ranked in memory.
        second = await _ask(client, org.headers, agent, question)
        assert (second["debug"]["plan"], second["debug"]["text_plan"]) == ("memory", "context")
        third = await _ask(client, org.headers, agent, question)
        assert (third["debug"]["plan"], third["debug"]["text_plan"]) == ("memory", "memory")
        assert _ranked(third) == _ranked(first)
        assert (third["answer"], third["confidence"]) == (first["answer"], first["confidence"])
        after = (await client.get("/metrics")).text
        for plan, calls in (("exact", 1), ("memory", 2)):
            label = f'plan="{plan}"'
            assert sample(after, plans, label) == sample(before, plans, label) + calls
        texts = "vk_query_text_plans_total"
        for plan, calls in (("context", 2), ("memory", 1), ("sql", 0)):
            label = f'plan="{plan}"'
            assert sample(after, texts, label) == sample(before, texts, label) + calls
        assert sample(after, "vk_vector_cache_bytes") == cache.held_bytes > 0
        assert _ranked(second) == _ranked(first)
        assert (second["answer"], second["confidence"]) == (first["answer"], first["confidence"])

        # A new document changes the KB's version: the old copy is not used, the new chunk
        # is found at once (in PostgreSQL), then from the reloaded copy.
        await create_text_doc(
            client, org.headers, kb["id"], title="Bicycles", content="Bicycle parking is by the side door."
        )
        assert await drain_queue() == {"ready": 1}
        # BM25 had been left to the copy: it is ranked in a statement of its own.
        stale = await _ask(client, org.headers, agent, "Where can I park my bicycle?")
        assert (stale["debug"]["plan"], stale["debug"]["text_plan"]) == ("exact", "sql")
        assert stale["sources"][0]["title"] == "Bicycles"
        await cache.settle()
        for text_plan in ("context", "memory"):
            fresh = await _ask(client, org.headers, agent, "Where can I park my bicycle?")
            assert (fresh["debug"]["plan"], fresh["debug"]["text_plan"]) == ("memory", text_plan)
            assert _ranked(fresh) == _ranked(stale)

        # A rename is heard at once: the copy held the old title.
        r = await client.put(
            f"/api/knowledge/{kb['id']}/documents/{faq['id']}",
            json={"title": "Dental FAQ"},
            headers=org.headers,
        )
        assert r.status_code == 200, r.text
        renamed = await _ask(client, org.headers, agent, "Which cards can I pay with?")
        assert (renamed["debug"]["plan"], renamed["debug"]["candidates"][0]["title"]) == (
            "exact",
            "Dental FAQ",
        )
        assert renamed["debug"]["text_plan"] == "sql"

        # A deleted document is never searched again, before or after the reload.
        await cache.settle()
        r = await client.delete(f"/api/knowledge/{kb['id']}/documents/{faq['id']}", headers=org.headers)
        assert r.status_code == 204
        for plan in ("exact", "memory"):
            body = await _ask(client, org.headers, agent, "Which cards can I pay with?")
            assert body["debug"]["plan"] == plan
            assert {c["title"] for c in body["debug"]["candidates"]} == {"Bicycles"}
            await cache.settle()


async def test_a_failed_load_leaves_the_call_to_postgresql(app, org, drain_queue, caplog, monkeypatch):
    def broken(*_args: Any) -> KBVectors:
        raise ValueError("broken copy")

    monkeypatch.setattr(KBVectors, "from_rows", broken)
    async with served(app) as client:
        cache: KBVectorCache = app.state.query_service.kb_vectors
        cache.reload_interval_s = cache.reload_factor = 0
        kb = await create_kb(client, org.headers, "Dental FAQ")
        await create_text_doc(client, org.headers, kb["id"], title="Practice FAQ", content=FAQ)
        agent = await assign_new_agent(client, org.headers, kb["id"])
        assert await drain_queue() == {"ready": 1}
        with caplog.at_level(logging.WARNING, logger="app.query.kb_vectors"):
            for _ in range(2):
                body = await _ask(client, org.headers, agent, "Where can I park?")
                assert (body["status"], body["debug"]["plan"]) == ("answered", "exact")
                await cache.settle()
        assert cache.held() == {}
        mine = [r.getMessage() for r in caplog.records if r.name == "app.query.kb_vectors"]
        assert mine == [f"could not load KB {kb['id']} into memory"] * 2
