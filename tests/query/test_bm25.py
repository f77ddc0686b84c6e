"""BM25 ranking over chunk_terms (migration 0004): rare words weigh, common ones barely do;
the term index follows its chunks in and out."""

from sqlalchemy import text

from tests.helpers import assign_new_agent, create_kb, create_text_doc

QUESTION = "Does the clinic treat zebras?"


async def _agent_with(client, org, drain_queue, docs: dict[str, str]) -> tuple[str, dict[str, str]]:
    """An agent whose one KB holds ``docs``; returns the agent and the document ids (and "kb")."""
    kb = await create_kb(client, org.headers, "Vet")
    ids = {}
    for title, content in docs.items():
        ids[title] = (await create_text_doc(client, org.headers, kb["id"], title=title, content=content))[
            "id"
        ]
    ids["kb"] = kb["id"]
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": len(docs)}
    return agent, ids


async def test_a_rare_word_outranks_a_common_word_repeated(client, org, drain_queue):
    # "clinic" and "treat" are everywhere; "zebra" is in one document, once. ts_rank (no
    # document frequencies) puts "clinic clinic clinic ... treat" first; BM25 must not.
    agent, ids = await _agent_with(
        client,
        org,
        drain_queue,
        {
            "Clinic": "The clinic clinic clinic is a clinic. Our clinic teams treat pets and treat birds.",
            "Hours": "The clinic opens at nine. We treat cats.",
            "Staff": "Every clinic vet can treat dogs.",
            "Fees": "The clinic charges fees when we treat animals.",
            "Exotic": "Yes, zebras are welcome; bring the vaccination card.",
        },
    )
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": QUESTION}, headers=org.headers,
        params={"debug": "true"},
    )  # fmt: skip
    candidates = r.json()["debug"]["candidates"]
    by_text_rank = sorted((c for c in candidates if c["text_rank"]), key=lambda c: c["text_rank"])
    assert by_text_rank[0]["document_id"] == ids["Exotic"]
    assert by_text_rank[0]["text_score"] > by_text_rank[1]["text_score"]
    assert len(by_text_rank) == 5  # any matching lexeme is enough to be a candidate


async def _terms(engine) -> list[tuple[str, str]]:
    """(document id, term) of every chunk_terms row, through the chunk it names."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT c.document_id::text, t.term FROM chunk_terms t "
                "LEFT JOIN chunks c ON c.id = t.chunk_id ORDER BY 1, 2"
            )
        )
        return [tuple(r) for r in rows.all()]


async def test_chunk_terms_follow_their_chunks(client, org, drain_queue, engine):
    _agent, ids = await _agent_with(
        client, org, drain_queue, {"Exotic": "Zebras are welcome at the clinic.", "Hours": "Open daily."}
    )
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT t.term, t.tf FROM chunk_terms t JOIN chunks c ON c.id = t.chunk_id "
                    "WHERE c.document_id = :d ORDER BY t.term"
                ),
                {"d": ids["Exotic"]},
            )
        ).all()
    # The KB's language (english) stems and drops stop words; the title counts too.
    assert [tuple(r) for r in rows] == [("clinic", 1), ("exot", 1), ("welcom", 1), ("zebra", 1)]
    hours = sorted([(ids["Hours"], "daili"), (ids["Hours"], "hour"), (ids["Hours"], "open")])
    assert len(await _terms(engine)) == 4 + len(hours)

    # A deleted document takes exactly its own rows (no row left pointing at no chunk).
    r = await client.delete(f"/api/knowledge/{ids['kb']}/documents/{ids['Exotic']}", headers=org.headers)
    assert r.status_code == 204
    assert await _terms(engine) == hours

    # Deleting the knowledge base cascades to its chunks, and from them to their rows.
    r = await client.delete(f"/api/knowledge/{ids['kb']}", headers=org.headers)
    assert r.status_code == 204
    assert await _terms(engine) == []


async def test_each_kb_is_searched_with_its_own_language(client, org, drain_queue):
    # A bilingual agent. The French KB's chunk is stemmed in French ("chevaux" -> "cheval"),
    # the English one's in English ("morning" -> "morn"); the question is stemmed both ways,
    # each KB matched with its own. One language for all would miss one of the two questions
    # whichever it is (English stems "chevaux" to "chevaux"; French keeps "mornings" whole).
    english = await create_kb(client, org.headers, "Stables", language="english")
    french = await create_kb(client, org.headers, "Écurie", language="french")
    horses = await create_text_doc(
        client,
        org.headers,
        english["id"],
        title="Paddock",
        content="Our horses run in the paddock every morning.",
    )
    chevaux = await create_text_doc(
        client, org.headers, french["id"], title="Foin", content="Nos chevaux mangent du foin chaque jour."
    )
    agent = await assign_new_agent(client, org.headers, english["id"])
    r = await client.put(
        f"/api/knowledge/{french['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    assert await drain_queue() == {"ready": 2}
    for question, expected in (
        ("Combien de chevaux avez-vous ?", chevaux["id"]),
        ("Anything special in the mornings?", horses["id"]),
    ):
        r = await client.post(
            f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers,
            params={"debug": "true"},
        )  # fmt: skip
        matched = [c["document_id"] for c in r.json()["debug"]["candidates"] if c["text_rank"]]
        assert matched == [expected], question


async def test_a_day_or_month_is_found_in_a_range_a_short_name_or_weekends(client, org, drain_queue):
    # "Wednesday" is written nowhere, nor "Sunday" or "weekend": the hours say "Mon-Fri" and
    # "Sun", the classes "weekends", the car park "weekdays", the garden "Apr–Oct". Callers ask
    # in other words.
    agent, ids = await _agent_with(
        client,
        org,
        drain_queue,
        {
            "Hours": "Open Mon-Fri 8 am to 6 pm. Sun 10 am to 2 pm.",
            "Classes": "Yoga classes run at weekends.",
            "Season": "The garden opens Apr–Oct only.",
            "Staff": "Dr Wei Sun and Dr Amy Mon see patients.",  # names, not days
            "Parking": "The car park is free for patients on weekdays.",
        },
    )
    found = {}
    questions = (
        "Can I come in on a Wednesday?",
        "Can I come in on a Sunday?",
        "Can I come in at the weekend?",
        "Can I come in August?",
    )
    for question in questions:
        r = await client.post(
            f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers,
            params={"debug": "true"},
        )  # fmt: skip
        found[question] = {c["document_id"] for c in r.json()["debug"]["candidates"] if c["text_rank"]}
    assert found == {
        "Can I come in on a Wednesday?": {ids["Hours"], ids["Parking"]},
        "Can I come in on a Sunday?": {ids["Hours"], ids["Classes"]},
        "Can I come in at the weekend?": {ids["Hours"], ids["Classes"]},
        "Can I come in August?": {ids["Season"]},
    }
