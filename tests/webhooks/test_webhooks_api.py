"""Registering webhooks: validation, the secret shown once, changes, and tenancy."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import text

from app.main import create_app
from tests.conftest import fake_resolver
from tests.helpers import bearer, create_key, served
from tests.webhooks.conftest import RECEIVER_URL, register


async def test_register_answers_with_the_secret_once(client, org):
    created = await register(client, org.headers, description="CRM sync", events=["document.status_changed"])
    assert created["url"] == RECEIVER_URL
    assert created["description"] == "CRM sync"
    assert created["events"] == ["document.status_changed"]
    assert created["active"] is True
    assert created["secret"].startswith("whsec_")
    assert len(created["secret"]) == len("whsec_") + 43  # 256 random bits, base64url

    one = await client.get(f"/api/webhooks/{created['id']}", headers=org.headers)
    assert one.status_code == 200
    listing = await client.get("/api/webhooks", headers=org.headers)
    assert listing.json()["total"] == 1
    for shown in (one.json(), listing.json()["items"][0]):
        assert "secret" not in shown
        assert shown == {k: v for k, v in created.items() if k != "secret"}


async def test_rotating_gives_a_new_secret_shown_once(client, org, engine):
    created = await register(client, org.headers)
    r = await client.post(f"/api/webhooks/{created['id']}/rotate-secret", headers=org.headers)
    assert r.status_code == 200, r.text
    rotated = r.json()["secret"]
    assert rotated.startswith("whsec_")
    assert rotated != created["secret"]
    async with engine.connect() as conn:
        stored = (
            await conn.execute(
                text("SELECT secret FROM webhook_endpoints WHERE id = :i"), {"i": created["id"]}
            )
        ).scalar_one()
    assert stored == rotated
    assert "secret" not in (await client.get(f"/api/webhooks/{created['id']}", headers=org.headers)).json()


async def test_events_default_to_all_and_repeats_are_dropped(client, org):
    assert (await register(client, org.headers))["events"] == ["*"]
    twice = await register(client, org.headers, events=["crawl.completed", "crawl.completed"])
    assert twice["events"] == ["crawl.completed"]
    with_all = await register(client, org.headers, events=["crawl.completed", "*"])
    assert with_all["events"] == ["*"]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://hooks.example.com/x", "the scheme ftp is not allowed (only http and https)"),
        ("hooks.example.com/x", "the URL must start with http:// or https://"),
        ("https://hooks.example.com:8443/x", "the port 8443 is not allowed"),
        ("http://10.0.0.5/hook", "the address 10.0.0.5 is not allowed (private network;"),
        ("http://127.0.0.1/hook", "the address 127.0.0.1 is not allowed (loopback)"),
        ("http://localhost/hook", "the host localhost is not allowed (local name)"),
        ("https://user:pw@hooks.example.com/", "the URL must not contain a user name or password"),
    ],
)
async def test_a_url_that_cannot_be_reached_is_refused(client, org, engine, url, reason):
    r = await client.post("/api/webhooks", json={"url": url}, headers=org.headers)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "bad_request"
    assert r.json()["detail"].startswith(f"this URL cannot be used for a webhook: {reason}")
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM webhook_endpoints"))).scalar_one() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": RECEIVER_URL, "events": ["document.deleted"]}, "events.0"),
        ({"url": RECEIVER_URL, "events": []}, "events"),
        ({"url": RECEIVER_URL, "active": "yes"}, "active"),
        ({"url": RECEIVER_URL, "secret": "mine"}, "secret"),
        ({"events": ["*"]}, "url"),
        # A URL parser drops a tab or line break inside it: the URL checked is not the one stored.
        ({"url": RECEIVER_URL + "/o\tk"}, "url"),
        ({"url": RECEIVER_URL + "/ok\r\nX-Injected: 1"}, "url"),
    ],
)
async def test_an_invalid_body_is_422_naming_the_field(client, org, body, field):
    r = await client.post("/api/webhooks", json=body, headers=org.headers)
    assert r.status_code == 422, r.text
    assert [f["field"] for f in r.json()["fields"]] == [field]


async def test_update_changes_what_is_sent_and_checks_the_new_url(client, org):
    created = await register(client, org.headers)
    path = f"/api/webhooks/{created['id']}"
    r = await client.patch(
        path, json={"events": ["crawl.completed"], "description": "crawls only"}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    assert (r.json()["events"], r.json()["description"], r.json()["url"]) == (
        ["crawl.completed"],
        "crawls only",
        RECEIVER_URL,
    )
    assert r.json()["updated_at"] is not None

    refused = await client.patch(path, json={"url": "http://192.168.1.10/"}, headers=org.headers)
    assert refused.status_code == 400
    assert "192.168.1.10 is not allowed" in refused.json()["detail"]
    assert (await client.get(path, headers=org.headers)).json()["url"] == RECEIVER_URL


async def test_delete_removes_the_webhook(client, org):
    created = await register(client, org.headers)
    r = await client.delete(f"/api/webhooks/{created['id']}", headers=org.headers)
    assert r.status_code == 204
    assert (await client.get(f"/api/webhooks/{created['id']}", headers=org.headers)).status_code == 404
    assert (await client.get("/api/webhooks", headers=org.headers)).json()["total"] == 0


async def test_a_query_key_cannot_manage_webhooks(client, org):
    query_key = await create_key(client, org.headers, "query")
    r = await client.post("/api/webhooks", json={"url": RECEIVER_URL}, headers=bearer(query_key["key"]))
    assert r.status_code == 403
    assert (await client.get("/api/webhooks", headers=bearer(query_key["key"]))).status_code == 403


async def test_another_organisations_webhook_is_404_everywhere(client, org, other_org, engine):
    theirs = await register(client, other_org.headers, description="theirs")
    ping = await client.post(f"/api/webhooks/{theirs['id']}/ping", headers=other_org.headers)
    assert ping.status_code == 202
    their_delivery = ping.json()["id"]
    mine = await register(client, org.headers)

    path = f"/api/webhooks/{theirs['id']}"
    attempts = [
        ("GET", path, None),
        ("PATCH", path, {"active": False, "url": "https://evil.example.com/"}),
        ("PATCH", path, {"url": "http://10.0.0.1/"}),  # 404 first, not the URL's 400
        ("DELETE", path, None),
        ("POST", f"{path}/rotate-secret", None),
        ("GET", f"{path}/deliveries", None),
        ("POST", f"{path}/ping", None),
        ("POST", f"{path}/deliveries/{their_delivery}/redeliver", None),
        # Their delivery under my own webhook's path.
        ("POST", f"/api/webhooks/{mine['id']}/deliveries/{their_delivery}/redeliver", None),
        ("GET", f"/api/webhooks/{uuid.uuid4()}", None),
    ]
    for method, target, body in attempts:
        r = await client.request(method, target, json=body, headers=org.headers)
        assert r.status_code == 404, (method, target, r.text)
        assert r.json()["error"] == "not_found"

    listing = (await client.get("/api/webhooks", headers=org.headers)).json()
    assert [w["id"] for w in listing["items"]] == [mine["id"]]
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT url, active, secret, description FROM webhook_endpoints WHERE id = :i"),
                {"i": theirs["id"]},
            )
        ).one()
        queued = (await conn.execute(text("SELECT count(*) FROM webhook_deliveries"))).scalar_one()
    assert tuple(row) == (RECEIVER_URL, True, theirs["secret"], "theirs")
    assert queued == 1  # their own ping; none of the attempts above queued anything


async def test_ping_and_redeliver_refuse_a_disabled_webhook(client, org):
    created = await register(client, org.headers)
    ping = (await client.post(f"/api/webhooks/{created['id']}/ping", headers=org.headers)).json()
    r = await client.patch(f"/api/webhooks/{created['id']}", json={"active": False}, headers=org.headers)
    assert r.json()["active"] is False
    for path in ("ping", f"deliveries/{ping['id']}/redeliver"):
        r = await client.post(f"/api/webhooks/{created['id']}/{path}", headers=org.headers)
        assert r.status_code == 409, r.text
        assert r.json()["detail"] == "this webhook is disabled; enable it (active: true) first"


async def test_the_delivery_log_is_paginated_newest_first(client, org):
    created = await register(client, org.headers)
    ids = []
    for _ in range(3):
        r = await client.post(f"/api/webhooks/{created['id']}/ping", headers=org.headers)
        assert r.status_code == 202
        assert (r.json()["event_type"], r.json()["status"], r.json()["attempts"]) == ("ping", "pending", 0)
        ids.append(r.json()["id"])
    path = f"/api/webhooks/{created['id']}/deliveries"
    first = (await client.get(path, params={"limit": 2}, headers=org.headers)).json()
    second = (await client.get(path, params={"limit": 2, "offset": 2}, headers=org.headers)).json()
    assert (first["total"], first["limit"], first["offset"]) == (3, 2, 0)
    assert [d["id"] for d in first["items"] + second["items"]] == ids[::-1]
    delivered = (await client.get(path, params={"status": "delivered"}, headers=org.headers)).json()
    assert (delivered["total"], delivered["items"]) == (0, [])
    bad = await client.get(path, params={"status": "lost"}, headers=org.headers)
    assert bad.status_code == 400


async def test_an_organisation_may_register_twenty_webhooks(client, org, other_org):
    for _ in range(20):
        await register(client, org.headers)
    r = await client.post("/api/webhooks", json={"url": RECEIVER_URL}, headers=org.headers)
    assert (r.status_code, r.json()["error"]) == (403, "quota_exceeded")
    assert r.json()["detail"] == "an organisation may register at most 20 webhooks"
    assert (await client.get("/api/webhooks", headers=org.headers)).json()["total"] == 20
    # The limit is the organisation's own.
    await register(client, other_org.headers)


async def test_concurrent_registrations_stop_at_twenty(database_url, settings, org, engine):
    # In the test's own loop behind an ASGI transport, so the requests really overlap.
    app = create_app(settings, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with served(app) as http:
        answers = await asyncio.gather(
            *(http.post("/api/webhooks", json={"url": RECEIVER_URL}, headers=org.headers) for _ in range(24))
        )
    assert sorted(r.status_code for r in answers) == [201] * 20 + [403] * 4
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM webhook_endpoints"))).scalar_one() == 20
