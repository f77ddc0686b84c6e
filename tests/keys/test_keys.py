import hashlib
import json

import pytest
from sqlalchemy import text

from tests.helpers import bearer, create_key


async def test_missing_header_is_401(client, org):
    r = await client.get("/api/knowledge")
    assert r.status_code == 401
    assert r.json() == {
        "error": "unauthorized",
        "detail": "missing API key: send 'Authorization: Bearer <key>'",
    }


async def test_unknown_key_is_401(client, org):
    r = await client.get("/api/knowledge", headers=bearer("vk_not-a-real-key"))
    assert r.status_code == 401
    assert r.json()["detail"] == "unknown or revoked API key"


async def _asgi_get(app, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict]:
    """One request straight to the ASGI app, headers as given: the test client would merge
    two headers of one name into one, as a server does not. Only for requests that end
    before the database (the app's engine lives on the test client's event loop)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"", "headers": headers,
        "client": ("127.0.0.1", 50000), "server": ("testserver", 80), "state": {},
    }  # fmt: skip
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


@pytest.mark.parametrize("good_first", [True, False])
async def test_two_authorization_headers_are_401_whichever_comes_first(app, client, org, good_first):
    keys = [org.admin_key, "vk_not-a-real-key"]
    sent = [(b"authorization", f"Bearer {key}".encode()) for key in (keys if good_first else keys[::-1])]
    status, body = await _asgi_get(app, "/api/knowledge", sent)
    assert (status, body["detail"]) == (401, "send one Authorization header, not several")
    assert (await client.get("/api/knowledge", headers=org.headers)).status_code == 200


async def test_wrong_scheme_is_401(client, org):
    r = await client.get("/api/knowledge", headers={"Authorization": f"Basic {org.admin_key}"})
    assert r.status_code == 401


async def test_create_shows_key_once_and_stores_only_hash(client, org, engine):
    created = await create_key(client, org.headers, "query")
    assert created["key"].startswith("vk_")
    assert created["prefix"] == created["key"][:12]
    assert created["role"] == "query"
    listing = (await client.get("/api/keys", headers=org.headers)).json()
    assert listing["total"] == 2
    assert all("key" not in k for k in listing["items"])
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text("SELECT key_hash, prefix FROM api_keys WHERE id = :i"), {"i": created["id"]}
            )
        ).one()
    assert bytes(rows.key_hash) == hashlib.sha256(created["key"].encode()).digest()
    async with engine.connect() as conn:
        dump = (
            await conn.execute(text("SELECT string_agg(row_to_json(k)::text, '') FROM api_keys k"))
        ).scalar_one()
    assert created["key"] not in dump


async def test_query_key_cannot_manage(client, org):
    query = await create_key(client, org.headers, "query")
    for method, path in (("GET", "/api/knowledge"), ("POST", "/api/knowledge"), ("GET", "/api/keys")):
        r = await client.request(
            method, path, json={"title": "x"} if method == "POST" else None, headers=bearer(query["key"])
        )
        assert r.status_code == 403, path
        assert r.json()["error"] == "forbidden"
    assert (await client.get("/api/knowledge", headers=org.headers)).json()["total"] == 0


async def test_revoked_key_stops_working_at_once(client, org):
    admin2 = await create_key(client, org.headers, "admin")
    assert (await client.get("/api/knowledge", headers=bearer(admin2["key"]))).status_code == 200
    r = await client.delete(f"/api/keys/{admin2['id']}", headers=org.headers)
    assert r.status_code == 204
    r = await client.get("/api/knowledge", headers=bearer(admin2["key"]))
    assert r.status_code == 401
    listed = {k["id"]: k for k in (await client.get("/api/keys", headers=org.headers)).json()["items"]}
    assert listed[admin2["id"]]["revoked_at"] is not None


async def test_last_admin_key_cannot_be_revoked(client, org):
    own = (await client.get("/api/keys", headers=org.headers)).json()["items"][0]
    r = await client.delete(f"/api/keys/{own['id']}", headers=org.headers)
    assert r.status_code == 409
    assert r.json()["error"] == "conflict"
    assert (await client.get("/api/knowledge", headers=org.headers)).status_code == 200


async def test_revoking_twice_is_404(client, org):
    q = await create_key(client, org.headers)
    assert (await client.delete(f"/api/keys/{q['id']}", headers=org.headers)).status_code == 204
    assert (await client.delete(f"/api/keys/{q['id']}", headers=org.headers)).status_code == 404


async def test_invalid_role_is_422(client, org):
    r = await client.post("/api/keys", json={"role": "owner"}, headers=org.headers)
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == "role"


async def test_last_used_is_recorded(client, org):
    q = await create_key(client, org.headers, "admin")
    await client.get("/api/knowledge", headers=bearer(q["key"]))
    items = {k["id"]: k for k in (await client.get("/api/keys", headers=org.headers)).json()["items"]}
    assert items[q["id"]]["last_used_at"] is not None
