"""A key of organisation A on any id of organisation B gets 404, and B's data is unchanged."""

import uuid

from sqlalchemy import text

from tests.helpers import create_kb, create_key, create_text_doc


async def _snapshot(engine, org_id):
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT 'kb' AS t, id::text, title || '|' || description AS v FROM knowledge_bases WHERE org_id = :o "
                "UNION ALL SELECT 'doc', id::text, title || '|' || status FROM documents WHERE org_id = :o "
                "UNION ALL SELECT 'agent', kb_id::text, agent_id::text FROM agent_assignments WHERE org_id = :o "
                "UNION ALL SELECT 'key', id::text, coalesce(revoked_at::text, 'live') FROM api_keys WHERE org_id = :o "
                "ORDER BY 1, 2, 3"
            ),
            {"o": org_id},
        )
        return [tuple(r) for r in rows]


async def test_foreign_ids_are_404_on_every_route(client, org, other_org, engine):
    b_kb = await create_kb(client, other_org.headers, "B's KB")
    b_doc = await create_text_doc(client, other_org.headers, b_kb["id"])
    b_agent = str(uuid.uuid4())
    r = await client.put(
        f"/api/knowledge/{b_kb['id']}/agents", json={"agent_ids": [b_agent]}, headers=other_org.headers
    )
    assert r.status_code == 200, r.text
    assert r.json()["agent_ids"] == [b_agent]
    b_key = await create_key(client, other_org.headers, "admin")
    before = await _snapshot(engine, other_org.id)
    assert ("agent", b_kb["id"], b_agent) in before

    kb_path = f"/api/knowledge/{b_kb['id']}"
    doc_path = f"{kb_path}/documents/{b_doc['id']}"
    attempts = [
        ("GET", kb_path, None),
        ("PUT", kb_path, {"title": "hijacked"}),
        ("DELETE", kb_path, None),
        ("PUT", f"{kb_path}/agents", {"agent_ids": []}),
        ("POST", f"{kb_path}/documents", {"title": "t", "content": "injected"}),
        ("POST", f"{kb_path}/documents", {"url": "https://example.com/x"}),
        ("GET", doc_path, None),
        ("PUT", doc_path, {"content": "changed"}),
        ("DELETE", doc_path, None),
        ("POST", f"{doc_path}/sync", None),
        ("DELETE", f"/api/keys/{b_key['id']}", None),
    ]
    for method, path, body in attempts:
        r = await client.request(method, path, json=body, headers=org.headers)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"] == "not_found"

    # Listings of A show nothing of B, while B's own key sees its data through the same
    # routes (so an empty answer to A means scoping, not a missing assignment).
    assert (await client.get("/api/knowledge", headers=org.headers)).json()["total"] == 0
    assert (await client.get("/api/knowledge", headers=other_org.headers)).json()["total"] == 1
    # B's agent was never assigned a KB of A, so A does not know it.
    r = await client.get(f"/api/agents/{b_agent}/knowledge", headers=org.headers)
    assert (r.status_code, r.json()["error"]) == (404, "not_found")
    b_view = (await client.get(f"/api/agents/{b_agent}/knowledge", headers=other_org.headers)).json()
    assert [kb["id"] for kb in b_view] == [b_kb["id"]]
    assert len((await client.get("/api/keys", headers=org.headers)).json()["items"]) == 1
    assert len((await client.get("/api/keys", headers=other_org.headers)).json()["items"]) == 2
    assert await _snapshot(engine, other_org.id) == before
