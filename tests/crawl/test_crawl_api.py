"""The crawl API: validation with readable 4xx, organisation scoping, cancel, run, delete."""

from __future__ import annotations

from sqlalchemy import text

from tests.crawl.conftest import HOST
from tests.crawl.test_crawl_runner import START, get_crawl, start_crawl
from tests.helpers import bearer, create_kb, create_key


def path(kb_id: str, *rest: str) -> str:
    return "/".join([f"/api/knowledge/{kb_id}/crawls", *rest])


async def test_new_crawl_is_queued_with_defaults(client, org):
    kb = await create_kb(client, org.headers)
    r = await client.post(path(kb["id"]), json={"url": "HTTPS://Docs.Example.com#top"}, headers=org.headers)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["start_url"] == f"https://{HOST}/"
    assert (body["status"], body["max_depth"], body["max_pages"], body["use_sitemap"]) == (
        "queued",
        3,
        200,
        True,
    )
    assert (body["include_patterns"], body["exclude_patterns"], body["sync_interval_s"]) == ([], [], None)
    assert body["progress"] == {
        "found": 0,
        "read": 0,
        "unchanged": 0,
        "failed": 0,
        "skipped": 0,
        "retired": 0,
    }
    r = await client.get(path(kb["id"]), headers=org.headers)
    assert r.status_code == 200
    assert [c["id"] for c in r.json()["items"]] == [body["id"]]
    assert r.json()["total"] == 1


async def test_private_host_is_refused_with_the_url_document_message(client, org):
    kb = await create_kb(client, org.headers)
    url = "http://10.1.2.3/wiki"
    r = await client.post(path(kb["id"]), json={"url": url}, headers=org.headers)
    doc = await client.post(f"/api/knowledge/{kb['id']}/documents", json={"url": url}, headers=org.headers)
    assert r.status_code == 400
    assert doc.status_code == 400
    assert r.json()["detail"] == doc.json()["detail"]
    assert r.json()["detail"] == (
        "this URL cannot be fetched: the address 10.1.2.3 is not allowed (private network; "
        "INGESTION__ALLOWED_HOSTS can allow this host)"
    )


async def test_bad_urls_are_refused(client, org):
    kb = await create_kb(client, org.headers)
    r = await client.post(path(kb["id"]), json={"url": "ftp://docs.example.com/"}, headers=org.headers)
    assert (r.status_code, r.json()["detail"]) == (
        400,
        "this URL cannot be fetched: the scheme ftp is not allowed (only http and https)",
    )
    r = await client.post(path(kb["id"]), json={"url": "https://localhost/"}, headers=org.headers)
    assert (r.status_code, r.json()["detail"]) == (
        400,
        "this URL cannot be fetched: the host localhost is not allowed (local name)",
    )
    r = await client.post(path(kb["id"]), json={}, headers=org.headers)
    assert r.status_code == 422


async def test_bad_options_are_refused_naming_the_field(client, org):
    kb = await create_kb(client, org.headers)
    cases = [
        ({"include_patterns": ["docs/*"]}, "include_patterns.0",
         "a pattern matches the URL's path, so it starts with / or * (e.g. /docs/*)"),
        ({"max_pages": 2001}, "max_pages", "at most 2000 pages (CRAWL__MAX_PAGES_LIMIT)"),
        ({"max_pages": 0}, "max_pages", "Input should be greater than or equal to 1"),
        ({"max_depth": 11}, "max_depth", "Input should be less than or equal to 10"),
        ({"sync_interval_s": 60}, "sync_interval_s", "at least 300 s, or 0 for never"),
        ({"exclude_patterns": ["/x"] * 21}, "exclude_patterns", "List should have at most 20 items after validation, not 21"),
        ({"follow": True}, "follow", "Extra inputs are not permitted"),
    ]  # fmt: skip
    for extra, field, message in cases:
        r = await client.post(path(kb["id"]), json={"url": START, **extra}, headers=org.headers)
        assert r.status_code == 422, (extra, r.text)
        assert {"field": field, "message": message} in r.json()["fields"], (extra, r.json())
    r = await client.get(path(kb["id"]), headers=org.headers)
    assert r.json()["total"] == 0


async def test_second_crawl_of_the_same_start_url_conflicts(client, org):
    kb = await create_kb(client, org.headers)
    first = await start_crawl(client, org, kb["id"])
    r = await client.post(path(kb["id"]), json={"url": f"https://{HOST}"}, headers=org.headers)
    assert r.status_code == 409
    assert r.json()["detail"] == f"this knowledge base already has a crawl from {START}: {first['id']}"


async def test_query_keys_cannot_manage_crawls(client, org):
    kb = await create_kb(client, org.headers)
    key = await create_key(client, org.headers, role="query")
    r = await client.post(path(kb["id"]), json={"url": START}, headers=bearer(key["key"]))
    assert r.status_code == 403


async def test_another_organisations_crawls_are_not_found(client, org, other_org, engine):
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"])
    other_kb = await create_kb(client, other_org.headers)
    h = other_org.headers
    for method, url in [
        ("GET", path(kb["id"])),
        ("GET", path(kb["id"], crawl["id"])),
        ("POST", path(kb["id"], crawl["id"], "cancel")),
        ("POST", path(kb["id"], crawl["id"], "run")),
        ("DELETE", path(kb["id"], crawl["id"])),
        # Its own KB with the other's crawl id.
        ("GET", path(other_kb["id"], crawl["id"])),
        ("DELETE", path(other_kb["id"], crawl["id"])),
    ]:
        r = await client.request(method, url, headers=h)
        assert r.status_code == 404, (method, url, r.text)
    r = await client.post(path(kb["id"]), json={"url": "https://other.example.org/"}, headers=h)
    assert (r.status_code, r.json()["detail"]) == (404, "knowledge base not found")
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["status"] == "queued"
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM crawls"))).scalar_one() == 1


async def test_cancel_of_a_queued_crawl_is_at_once_and_run_queues_it_again(client, org, run_crawls, site):
    site.html("/", "Home", "Home page.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"])
    r = await client.post(path(kb["id"], crawl["id"], "cancel"), headers=org.headers)
    assert (r.status_code, r.json()["status"]) == (202, "cancelled")
    r = await client.post(path(kb["id"], crawl["id"], "cancel"), headers=org.headers)
    assert (r.status_code, r.json()["detail"]) == (
        409,
        "the crawl is not queued or running (it is cancelled)",
    )
    assert await run_crawls() == {}
    assert site.sent == []
    r = await client.post(path(kb["id"], crawl["id"], "run"), headers=org.headers)
    assert (r.status_code, r.json()["status"]) == (202, "queued")
    r = await client.post(path(kb["id"], crawl["id"], "run"), headers=org.headers)
    assert (r.status_code, r.json()["detail"]) == (409, "the crawl is already queued")
    assert await run_crawls() == {"completed": 1}


async def test_delete_removes_the_crawl_and_its_pages(client, org, engine, site, run_crawls, ingest):
    site.html("/", "Home", "Home page.", links=("/a",))
    site.html("/a", "A", "Page a.")
    kb = await create_kb(client, org.headers)
    kept = (
        await client.post(
            f"/api/knowledge/{kb['id']}/documents",
            json={"title": "Own", "content": "Mine."},
            headers=org.headers,
        )
    ).json()
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    assert await ingest() == {"ready": 3}
    r = await client.delete(path(kb["id"], crawl["id"]), headers=org.headers)
    assert r.status_code == 204
    assert (await client.get(path(kb["id"], crawl["id"]), headers=org.headers)).status_code == 404
    async with engine.connect() as conn:
        docs = (await conn.execute(text("SELECT id::text FROM documents"))).scalars().all()
        chunks = (await conn.execute(text("SELECT count(*) FROM chunks"))).scalar_one()
    assert docs == [kept["id"]]
    assert chunks == 1
    r = await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)
    assert r.json()["document_count"] == 1
