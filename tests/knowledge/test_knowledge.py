import uuid

import pytest
from sqlalchemy import text

from tests.helpers import assign_new_agent, create_kb, create_text_doc


async def test_create_returns_201_with_defaults(client, org):
    r = await client.post(
        "/api/knowledge", json={"title": "  Billing  ", "description": "Invoices"}, headers=org.headers
    )
    assert r.status_code == 201
    body = r.json()
    assert body["title"] == "Billing"
    assert body["description"] == "Invoices"
    assert body["document_count"] == 0
    assert body["agent_ids"] == []
    assert body["language"] == "english"
    assert body["chunk_tokens"] == 500
    assert body["chunk_overlap_tokens"] == 60
    assert "org_id" not in body
    uuid.UUID(body["id"])


async def test_list_is_paginated_with_counts_and_agents(client, org):
    kbs = [await create_kb(client, org.headers, f"KB {i}") for i in range(3)]
    agent = str(uuid.uuid4())
    await client.put(
        f"/api/knowledge/{kbs[1]['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers
    )
    await create_text_doc(client, org.headers, kbs[1]["id"])

    r = await client.get("/api/knowledge?limit=2&offset=1", headers=org.headers)
    assert r.status_code == 200
    page = r.json()
    assert page["total"] == 3
    assert page["limit"] == 2
    assert page["offset"] == 1
    assert [kb["title"] for kb in page["items"]] == ["KB 1", "KB 2"]
    assert page["items"][0]["agent_ids"] == [agent]
    assert page["items"][0]["document_count"] == 1


async def test_page_size_is_capped(client, org):
    r = await client.get("/api/knowledge?limit=201", headers=org.headers)
    assert r.status_code == 400
    assert r.json()["error"] == "bad_request"
    assert "limit" in r.json()["detail"]


async def test_get_returns_documents(client, org):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)
    assert r.status_code == 200
    docs = r.json()["documents"]
    assert [d["id"] for d in docs] == [doc["id"]]
    assert docs[0]["status"] == "pending"
    assert docs[0]["chunk_count"] == 0


async def test_the_kb_view_shows_why_a_document_failed(client, org, drain_queue):
    kb = await create_kb(client, org.headers)
    good = await create_text_doc(client, org.headers, kb["id"], content="We open at nine.")
    bad = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        content="<html><body><script>x()</script></body></html>",
        content_type="html",
    )
    assert await drain_queue() == {"ready": 1, "failed": 1}
    r = await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)
    assert [(d["id"], d["status"], d["error"]) for d in r.json()["documents"]] == [
        (good["id"], "ready", None),
        (bad["id"], "failed", "no text found"),
    ]


async def test_update_title_and_description(client, org):
    kb = await create_kb(client, org.headers)
    r = await client.put(f"/api/knowledge/{kb['id']}", json={"description": "new"}, headers=org.headers)
    assert r.status_code == 200
    assert r.json()["title"] == "Support FAQ"
    assert r.json()["description"] == "new"
    assert r.json()["updated_at"] is not None


async def test_delete_removes_documents_and_chunks(client, org, engine):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO chunks (org_id, kb_id, document_id, ordinal, text, token_count, embedding_model,"
                " embedding_dim, embedding, tsv) VALUES (:o, :k, :d, 0, 'x', 1, 'm', 3, '[1,0,0]', to_tsvector('x'))"
            ),
            {"o": org.id, "k": kb["id"], "d": doc["id"]},
        )
    r = await client.delete(f"/api/knowledge/{kb['id']}", headers=org.headers)
    assert r.status_code == 204
    assert (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).status_code == 404
    async with engine.connect() as conn:
        counts = (
            await conn.execute(text("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)"))
        ).one()
    assert tuple(counts) == (0, 0)


async def test_missing_title_is_422_naming_the_field(client, org):
    r = await client.post("/api/knowledge", json={"description": "x"}, headers=org.headers)
    assert r.status_code == 422
    body = r.json()
    assert body["error"] == "validation_error"
    assert [f["field"] for f in body["fields"]] == ["title"]


async def test_blank_title_is_422(client, org):
    r = await client.post("/api/knowledge", json={"title": "   "}, headers=org.headers)
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == "title"


async def test_overlong_title_is_422(client, org):
    r = await client.post("/api/knowledge", json={"title": "x" * 201}, headers=org.headers)
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == "title"


async def test_unknown_fields_are_refused_no_mass_assignment(client, org, other_org):
    r = await client.post(
        "/api/knowledge",
        json={"title": "t", "id": str(uuid.uuid4()), "org_id": str(other_org.id)},
        headers=org.headers,
    )
    assert r.status_code == 422
    assert sorted(f["field"] for f in r.json()["fields"]) == ["id", "org_id"]
    listing = (await client.get("/api/knowledge", headers=other_org.headers)).json()
    assert listing["total"] == 0


async def test_non_json_body_is_400(client, org):
    r = await client.post(
        "/api/knowledge", content=b"{not json", headers={**org.headers, "Content-Type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["error"] == "bad_request"


async def test_malformed_uuid_in_path_is_400_naming_it(client, org):
    r = await client.get("/api/knowledge/not-a-uuid", headers=org.headers)
    assert r.status_code == 400
    assert r.json()["fields"] == [{"field": "kb_id", "message": "Invalid UUID"}]


async def test_unknown_language_is_422(client, org):
    r = await client.post("/api/knowledge", json={"title": "t", "language": "klingon"}, headers=org.headers)
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == "language"


async def test_overlap_above_half_is_422(client, org):
    r = await client.post(
        "/api/knowledge",
        json={"title": "t", "chunk_tokens": 200, "chunk_overlap_tokens": 150},
        headers=org.headers,
    )
    assert r.status_code == 422
    # In the service's words, not pydantic's "Value error, ...".
    assert r.json()["fields"] == [
        {"field": "body", "message": "chunk_overlap_tokens must be at most half of chunk_tokens"}
    ]


async def test_replace_agents(client, org):
    kb = await create_kb(client, org.headers)
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    r = await client.put(
        f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [a, b, a]}, headers=org.headers
    )
    assert r.status_code == 200
    assert r.json()["agent_ids"] == sorted([a, b])
    r = await client.put(f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [c]}, headers=org.headers)
    assert r.json()["agent_ids"] == [c]
    assert (await client.get(f"/api/agents/{a}/knowledge", headers=org.headers)).json() == []
    assigned = (await client.get(f"/api/agents/{c}/knowledge", headers=org.headers)).json()
    assert [k["id"] for k in assigned] == [kb["id"]]


async def test_malformed_agent_id_is_422_and_changes_nothing(client, org):
    kb = await create_kb(client, org.headers)
    agent = await assign_new_agent(client, org.headers, kb["id"])
    r = await client.put(
        f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": ["nope"]}, headers=org.headers
    )
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == "agent_ids.0"
    assert (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()["agent_ids"] == [
        agent
    ]


async def test_agent_knowledge_lists_only_assigned(client, org):
    agent = str(uuid.uuid4())
    kb1 = await create_kb(client, org.headers, "one")
    await create_kb(client, org.headers, "two")
    await client.put(f"/api/knowledge/{kb1['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers)
    r = await client.get(f"/api/agents/{agent}/knowledge", headers=org.headers)
    assert r.status_code == 200
    assert [k["title"] for k in r.json()] == ["one"]


@pytest.mark.parametrize(
    ("sent", "status", "stored"),
    [
        (True, 422, "Input should be a valid integer"),
        ("200", 422, "Input should be a valid integer"),
        (200.5, 422, "Input should be a valid integer, got a number with a fractional part"),
        (200.0, 201, 200),
        (200, 201, 200),
    ],
)
async def test_chunk_sizes_are_json_integers(client, org, sent, status, stored):
    # Litestar asks pydantic for lax validation, which took true as 1 and "200" as 200; the
    # schema says integer, and 200.0 is one.
    r = await client.post("/api/knowledge", json={"title": "t", "chunk_tokens": sent}, headers=org.headers)
    assert (sent, r.status_code) == (sent, status), r.text
    if status == 201:
        assert r.json()["chunk_tokens"] == stored
    else:
        assert r.json()["fields"] == [{"field": "chunk_tokens", "message": stored}]


@pytest.mark.parametrize(
    ("title", "message"),
    [
        (" \t\u3000", "must not be empty or only whitespace"),
        ("\x1c", "must not be empty or only whitespace"),  # Python's whitespace, as the schema spells it
        (" \u200b\u200d\ufeff\u2066 ", "must hold a visible character"),  # shows nothing
        ("Garden\x1b[2J shop", "must not hold control characters"),  # a terminal's escape
        (" " + "a" * 200, "String should have at most 200 characters"),  # counted as sent
    ],
)
async def test_a_title_is_checked_as_its_schema_says(client, org, title, message):
    r = await client.post("/api/knowledge", json={"title": title}, headers=org.headers)
    assert (r.status_code, r.json()["fields"]) == (422, [{"field": "title", "message": message}])


async def test_a_description_may_hold_line_breaks_but_no_other_control_character(client, org):
    r = await client.post(
        "/api/knowledge", json={"title": "t", "description": "Line one.\n\tLine two."}, headers=org.headers
    )
    assert (r.status_code, r.json()["description"]) == (201, "Line one.\n\tLine two.")
    r = await client.post(
        "/api/knowledge", json={"title": "t", "description": "Ring\x07"}, headers=org.headers
    )
    assert (r.status_code, r.json()["fields"]) == (
        422,
        [{"field": "description", "message": "must not hold control characters"}],
    )


async def test_a_line_break_or_tab_in_a_title_is_a_space(client, org):
    r = await client.post("/api/knowledge", json={"title": "Garden\nshop\tprices"}, headers=org.headers)
    assert (r.status_code, r.json()["title"]) == (201, "Garden shop prices")


async def test_a_title_is_stored_without_surrounding_whitespace(client, org):
    r = await client.post("/api/knowledge", json={"title": "  Front desk\u3000"}, headers=org.headers)
    assert (r.status_code, r.json()["title"]) == (201, "Front desk")
