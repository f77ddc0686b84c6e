"""query_knowledge in the offline mode (lexical embedder, extractive answerer)."""

import uuid

from sqlalchemy import text

from app.embeddings.base import EmbeddingError
from app.ingestion.pipeline import Ingestor
from app.ingestion.worker import drain
from tests.helpers import assign_new_agent, bearer, create_kb, create_key, create_text_doc


async def ask(client, headers, agent, query, **params):
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": query}, headers=headers, params=params
    )
    return r


async def test_answers_from_the_agents_knowledge(client, org, faq_agent):
    r = await ask(client, org.headers, faq_agent["agent"], "When do you open on Saturday?")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "answered"
    assert body["answer"] == "On Saturdays we open from 10 AM to 1 PM."
    assert body["cached"] is False
    assert body["degraded"] is False
    assert 0 < body["confidence"] <= 1
    assert body["sources"][0]["document_id"] == faq_agent["doc"]["id"]
    assert body["sources"][0]["title"] == "Practice FAQ"
    assert body["sources"][0]["section"] == "Opening hours"
    assert set(body["timings_ms"]) == {"embed", "search", "llm", "total", "own"}
    assert body["timings_ms"]["llm"] == 0
    uuid.UUID(body["query_id"])


async def test_query_key_may_ask(client, org, faq_agent):
    key = await create_key(client, org.headers, "query")
    r = await ask(client, bearer(key["key"]), faq_agent["agent"], "Where can I park?")
    assert r.status_code == 200
    assert r.json()["answer"] == "Free parking is available behind the building, entrance on Elm Street."


async def test_same_question_is_served_from_cache_until_kb_changes(client, org, faq_agent, drain_queue):
    first = (await ask(client, org.headers, faq_agent["agent"], "Where can I park?")).json()
    second = (await ask(client, org.headers, faq_agent["agent"], "  where can I PARK ")).json()
    assert second["cached"] is True
    assert second["answer"] == first["answer"]
    assert second["query_id"] != first["query_id"]
    kb, doc = faq_agent["kb"], faq_agent["doc"]
    await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"content": "# Parking\nParking is in the garage on Oak Road.", "content_type": "markdown"},
        headers=org.headers,
    )
    await drain_queue()
    third = (await ask(client, org.headers, faq_agent["agent"], "Where can I park?")).json()
    assert third["cached"] is False
    assert third["answer"] == "Parking is in the garage on Oak Road."


async def test_unrelated_question_is_not_found(client, org, faq_agent):
    body = (
        await ask(client, org.headers, faq_agent["agent"], "Who won the football world cup in 1998?")
    ).json()
    assert body["status"] == "not_found"
    assert body["answer"] == "I'm sorry, I don't have that information."


async def test_agent_with_no_ready_documents_gets_spoken_not_found(client, org):
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"])  # still pending
    agent = await assign_new_agent(client, org.headers, kb["id"])
    r = await ask(client, org.headers, agent, "When do you open?")
    assert r.status_code == 200
    assert r.json()["status"] == "not_found"
    assert r.json()["sources"] == []


async def test_unknown_agent_is_404(client, org):
    r = await ask(client, org.headers, str(uuid.uuid4()), "When do you open?")
    assert r.status_code == 404


async def test_query_key_of_another_organisation_is_404(client, org, other_org, faq_agent):
    key = await create_key(client, other_org.headers, "query")
    r = await ask(client, bearer(key["key"]), faq_agent["agent"], "Where can I park?")
    assert r.status_code == 404
    assert r.json()["error"] == "not_found"


async def test_agent_never_sees_unassigned_kb(client, org, faq_agent, drain_queue):
    secret = await create_kb(client, org.headers, "Internal")
    salaries = await create_text_doc(
        client, org.headers, secret["id"], title="Salaries", content="The dentist earns 200000 euros a year."
    )
    assert await drain_queue() == {"ready": 1}
    question = "How much does the dentist earn a year?"
    body = (await ask(client, org.headers, faq_agent["agent"], question, debug="true")).json()
    assert (body["status"], body["sources"]) == ("not_found", [])
    candidates = body["debug"]["candidates"]
    assert candidates  # retrieval ran over the agent's own KB...
    assert {c["document_id"] for c in candidates} == {faq_agent["doc"]["id"]}  # ...and no other
    # Positive control: an agent assigned the other KB is answered from it.
    insider = str(uuid.uuid4())
    r = await client.put(
        f"/api/knowledge/{secret['id']}/agents", json={"agent_ids": [insider]}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    body = (await ask(client, org.headers, insider, question)).json()
    assert (body["status"], body["answer"]) == ("answered", "The dentist earns 200000 euros a year.")
    assert {s["document_id"] for s in body["sources"]} == {salaries["id"]}


async def test_malformed_query_is_422(client, org, faq_agent):
    r = await client.post(
        f"/api/agents/{faq_agent['agent']}/query_knowledge", json={"question": "x"}, headers=org.headers
    )
    assert r.status_code == 422
    r = await client.post(
        f"/api/agents/{faq_agent['agent']}/query_knowledge", json={"query": ""}, headers=org.headers
    )
    assert r.status_code == 422
    r = await client.post(
        f"/api/agents/{faq_agent['agent']}/query_knowledge", json={"query": "x" * 2001}, headers=org.headers
    )
    assert r.status_code == 422


async def test_debug_needs_admin_key(client, org, faq_agent):
    key = await create_key(client, org.headers, "query")
    r = await ask(client, bearer(key["key"]), faq_agent["agent"], "Where can I park?", debug="true")
    assert r.status_code == 403


async def test_debug_shows_candidates_and_confidence(client, org, faq_agent):
    body = (await ask(client, org.headers, faq_agent["agent"], "Where can I park?", debug="true")).json()
    debug = body["debug"]
    assert debug["plan"] == "exact"
    assert debug["embedded"] is True
    assert debug["candidates"][0]["section"] == "Parking"
    assert debug["candidates"][0]["vector_rank"] == 1
    assert debug["candidates"][0]["text_rank"] == 1
    assert set(debug["confidence"]) == {"coverage", "similarity", "confidence"}
    assert debug["confidence"]["confidence"] == body["confidence"]


async def test_every_call_is_logged_and_gaps_are_grouped(client, org, faq_agent):
    agent = faq_agent["agent"]
    await ask(client, org.headers, agent, "Where can I park?")
    await ask(client, org.headers, agent, "Do you offer teeth whitening with lasers?")
    await ask(client, org.headers, agent, "do you offer teeth whitening with lasers")
    r = await client.get(f"/api/agents/{agent}/queries", headers=org.headers)
    assert r.status_code == 200
    page = r.json()
    assert page["total"] == 3
    newest = page["items"][0]
    assert newest["status"] == "not_found"
    assert newest["prompt_variant"] == "default"
    assert newest["model"] == "extractive"
    r = await client.get(f"/api/agents/{agent}/queries", params={"status": "answered"}, headers=org.headers)
    assert [q["query"] for q in r.json()["items"]] == ["Where can I park?"]
    assert r.json()["items"][0]["chunks"][0]["vector_rank"] == 1
    gaps = (await client.get("/api/knowledge-gaps", headers=org.headers)).json()
    assert len(gaps) == 1
    assert gaps[0]["count"] == 2
    assert gaps[0]["agent_ids"] == [agent]
    assert gaps[0]["question"].lower().startswith("do you offer teeth whitening")


async def test_query_log_is_private_to_the_organisation(client, org, other_org, faq_agent):
    agent = faq_agent["agent"]
    assert (await ask(client, org.headers, agent, "Where can I park?")).json()["status"] == "answered"
    gap = "Do you offer teeth whitening with lasers?"
    assert (await ask(client, org.headers, agent, gap)).json()["status"] == "not_found"
    # The organisation's own admin sees both calls and the gap...
    own = (await client.get(f"/api/agents/{agent}/queries", headers=org.headers)).json()
    assert own["total"] == 2
    own_gaps = (await client.get("/api/knowledge-gaps", headers=org.headers)).json()
    assert [(g["question"], g["count"]) for g in own_gaps] == [(gap, 1)]
    # ...another organisation's admin sees none of them: the agent is not theirs.
    r = await client.get(f"/api/agents/{agent}/queries", headers=other_org.headers)
    assert (r.status_code, r.json()["error"]) == (404, "not_found")
    r = await client.get("/api/knowledge-gaps", headers=other_org.headers)
    assert r.status_code == 200
    assert r.json() == []


async def test_small_kb_among_many_gets_full_top_k(client, org, other_org, faq_agent, engine):
    """FIELD-NOTES: a filtered HNSW scan reads ef_search (40) candidates and filters after,
    so a small KB can come back short, even empty. Here 3,000 chunks of another
    organisation carry exactly the question's own vector (the nearest possible), and our
    4-chunk KB must still return all 4 chunks. (`python -m bench.query` runs the full
    100,000-chunk case.)"""
    from app.embeddings.lexical import LexicalEmbedder
    from app.query.service import normalise_question

    question = "Where is parking?"
    vector = (await LexicalEmbedder(512).embed_documents([normalise_question(question)]))[0]
    big = await create_kb(client, other_org.headers, "Big")
    doc = await create_text_doc(client, other_org.headers, big["id"], title="Noise")
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO chunks (org_id, kb_id, document_id, ordinal, text, token_count, embedding_model,"
                " embedding_dim, embedding, tsv) SELECT :o, :k, :d, g, 'where is parking ' || g, 3,"
                " 'lexical-v1:512', 512, CAST(:v AS vector), to_tsvector('english', 'where is parking')"
                " FROM generate_series(1, 3000) g"
            ),
            {"o": other_org.id, "k": big["id"], "d": doc["id"], "v": str(vector)},
        )
        await conn.execute(text("ANALYZE chunks"))
    body = (await ask(client, org.headers, faq_agent["agent"], question, debug="true")).json()
    assert body["debug"]["plan"] == "exact"
    assert len(body["debug"]["candidates"]) == 4
    assert {c["document_id"] for c in body["debug"]["candidates"]} == {faq_agent["doc"]["id"]}
    assert body["answer"] == "Free parking is available behind the building, entrance on Elm Street."


class _RejectingEmbedder:
    """The app's embedder, except that a batch holding ``marker`` is rejected for good (as a
    provider rejects an input it will never accept): the document's indexing fails."""

    def __init__(self, inner, marker):
        self.inner, self.marker = inner, marker

    @property
    def model_key(self):
        return self.inner.model_key

    @property
    def dimensions(self):
        return self.inner.dimensions

    async def embed_documents(self, texts):
        if any(self.marker in t for t in texts):
            raise EmbeddingError("input rejected", retryable=False)
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text, *, timeout):
        return await self.inner.embed_query(text, timeout=timeout)


async def _drain_rejecting(app, engine, marker):
    state = app.state
    embedder = _RejectingEmbedder(state.embedder, marker)
    return await drain(Ingestor(engine, embedder, state.fetcher, state.settings.ingestion, "test-worker"))


async def _document(client, org, kb_id, doc_id):
    r = await client.get(f"/api/knowledge/{kb_id}/documents/{doc_id}", headers=org.headers)
    assert r.status_code == 200, r.text
    return r.json()


async def test_chunks_of_a_document_never_ready_are_never_retrieved(
    client, app, engine, org, faq_agent, drain_queue
):
    """A document whose first indexing failed answers nothing, even about its own words;
    once a version of it is ready, the same question is answered from it."""
    kb = faq_agent["kb"]
    whitening = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        title="Whitening",
        content="# Whitening\nWe offer laser teeth whitening on Tuesdays.",
        content_type="markdown",
    )
    assert await _drain_rejecting(app, engine, "whitening") == {"failed": 1}
    assert (await _document(client, org, kb["id"], whitening["id"]))["status"] == "failed"
    question = "Do you offer laser teeth whitening?"
    body = (await ask(client, org.headers, faq_agent["agent"], question, debug="true")).json()
    assert body["status"] == "not_found"
    assert body["debug"]["candidates"]  # the FAQ was searched
    assert {c["document_id"] for c in body["debug"]["candidates"]} == {faq_agent["doc"]["id"]}
    # Positive control: the next version is indexed and answers the same question.
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{whitening['id']}",
        json={"content": "# Whitening\nWe offer laser teeth whitening on Tuesdays and Thursdays."},
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    assert await drain_queue() == {"ready": 1}
    body = (await ask(client, org.headers, faq_agent["agent"], question)).json()
    assert (body["status"], body["sources"][0]["document_id"]) == ("answered", whitening["id"])
    assert body["answer"] == "We offer laser teeth whitening on Tuesdays and Thursdays."


async def test_a_failed_new_version_keeps_answering_from_the_previous_chunks(
    client, app, engine, org, faq_agent
):
    """Issue #3: nothing already indexed is lost when a new version of a document fails; the
    previous chunks stay live (and the document says it failed)."""
    kb, doc = faq_agent["kb"], faq_agent["doc"]
    question = "Where can I park?"
    before = (await ask(client, org.headers, faq_agent["agent"], question)).json()
    assert before["answer"] == "Free parking is available behind the building, entrance on Elm Street."
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"content": "# Parking\nParking is in the garage on Oak Road.", "content_type": "markdown"},
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    assert await _drain_rejecting(app, engine, "garage") == {"failed": 1}
    failed = await _document(client, org, kb["id"], doc["id"])
    assert (failed["status"], failed["chunk_count"]) == ("failed", 4)
    # Debug mode reads no cached answer: this is retrieved from the chunks live now.
    after = (await ask(client, org.headers, faq_agent["agent"], question, debug="true")).json()
    assert (after["status"], after["answer"], after["cached"]) == (
        "answered",
        "Free parking is available behind the building, entrance on Elm Street.",
        False,
    )
    assert {c["document_id"] for c in after["debug"]["candidates"]} == {doc["id"]}
    assert after["debug"]["candidates"][0]["section"] == "Parking"
    assert len(after["debug"]["candidates"]) == 4  # every previous chunk, none of the new version
