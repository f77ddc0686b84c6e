"""Re-crawls: conditional requests, nothing re-indexed for an unchanged site, changed pages
re-indexed, disappeared pages retired; scheduled and on demand."""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import text

from tests.crawl.conftest import HOST
from tests.crawl.test_crawl_runner import START, get_crawl, pages, start_crawl
from tests.helpers import create_kb

LAST_MODIFIED = "Wed, 21 Oct 2026 07:28:00 GMT"


def build_site(site: Any) -> None:
    site.html("/", "Home", "Welcome to the help centre.", links=("/etag", "/dated", "/plain", "/old"))
    site.html("/etag", "Parking", "Park on level two.")
    site.html("/dated", "Hours", "We open at nine.", etag=False, last_modified=LAST_MODIFIED)
    site.html("/plain", "Lockers", "Lockers are by the entrance.", etag=False)
    site.html("/old", "Old news", "The old canteen closed.")


async def crawl_and_index(
    client, org, site, run_crawls, ingest, **body
) -> tuple[dict[str, Any], dict[str, Any]]:
    build_site(site)
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False, **body)
    assert await run_crawls() == {"completed": 1}
    assert await ingest() == {"ready": 5}
    return kb, crawl


async def rerun(client, org, kb, crawl) -> None:
    r = await client.post(f"/api/knowledge/{kb['id']}/crawls/{crawl['id']}/run", headers=org.headers)
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "queued"


async def chunk_texts(engine: Any, crawl_id: str) -> dict[str, list[str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT d.source_url, c.text FROM chunks c JOIN documents d ON d.id = c.document_id "
                "WHERE d.crawl_id = :c ORDER BY d.source_url, c.ordinal"
            ),
            {"c": crawl_id},
        )
        found: dict[str, list[str]] = {}
        for url, chunk in rows:
            found.setdefault(url.removeprefix(f"https://{HOST}"), []).append(chunk)
        return found


async def test_unchanged_site_is_fetched_conditionally_and_embeds_nothing(
    client, org, engine, site, run_crawls, ingest, embedded
):
    kb, crawl = await crawl_and_index(client, org, site, run_crawls, ingest)
    embedded_before = len(embedded.texts)
    assert embedded_before == 5
    first = len(site.sent)

    await rerun(client, org, kb, crawl)
    assert await run_crawls() == {"completed": 1}

    again = site.sent[first:]
    assert [s.path for s in again] == ["/robots.txt", "/", "/etag", "/dated", "/plain", "/old"]
    by_path = {s.path: s.headers for s in again}
    served = site.pages[(HOST, "/etag")].body.encode()
    assert by_path["/etag"]["If-None-Match"] == f'"{hashlib.sha256(served).hexdigest()[:12]}"'
    assert "If-Modified-Since" not in by_path["/etag"]
    assert by_path["/dated"]["If-Modified-Since"] == LAST_MODIFIED
    assert "If-None-Match" not in by_path["/dated"]
    assert "If-None-Match" not in by_path["/plain"]
    assert "If-Modified-Since" not in by_path["/plain"]
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    # / /etag /old answer 304 (ETag), /dated 304 (Last-Modified), /plain 200 with the same hash.
    assert got["progress"] == {"found": 5, "read": 0, "unchanged": 5, "failed": 0, "skipped": 0, "retired": 0}
    # Nothing was queued again, so nothing is extracted or embedded.
    assert await ingest() == {}
    assert len(embedded.texts) == embedded_before


async def test_changed_page_is_reindexed_and_disappeared_pages_are_retired(
    client, org, engine, site, run_crawls, ingest, embedded
):
    kb, crawl = await crawl_and_index(client, org, site, run_crawls, ingest)
    before = len(embedded.texts)
    site.html("/etag", "Parking", "Park on level three now.")
    del site.pages[(HOST, "/old")]  # 404 now
    site.html(
        "/", "Home", "Welcome to the help centre.", links=("/etag", "/dated", "/old")
    )  # /plain unlinked

    await rerun(client, org, kb, crawl)
    assert await run_crawls() == {"completed": 1}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    # The home page changed (a link fewer) as well as /etag.
    assert got["progress"] == {"found": 4, "read": 2, "unchanged": 1, "failed": 0, "skipped": 0, "retired": 2}
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/etag", f"https://{HOST}/dated"}

    assert await ingest() == {"ready": 2}
    # Only the two changed pages' text is embedded (the home page lost a link's text).
    assert sorted(embedded.texts[before:]) == [
        "Home\n\nWelcome to the help centre.\n\n/etag /dated /old",
        "Parking\n\nPark on level three now.",
    ]
    texts = await chunk_texts(engine, crawl["id"])
    assert texts["/etag"] == ["Park on level three now."]
    assert set(texts) == {"/", "/etag", "/dated"}


async def test_a_failed_run_retires_nothing(client, org, engine, site, run_crawls, ingest):
    kb, crawl = await crawl_and_index(client, org, site, run_crawls, ingest)
    site.pages.clear()
    site.page("/", "down", content_type="text/plain", status=503)
    await rerun(client, org, kb, crawl)
    assert await run_crawls() == {"failed": 1}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["error"] == "the start page could not be read: the server answered HTTP 503"
    assert got["documents"] == 5


async def test_a_page_that_fails_for_now_keeps_what_only_it_links_to(
    client, org, engine, site, run_crawls, ingest
):
    build_site(site)
    site.html("/etag", "Parking", "Park on level two.", links=("/deep",))
    site.html("/deep", "Deep", "Only linked from parking.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    assert (await get_crawl(client, org, kb["id"], crawl["id"]))["documents"] == 6
    site.page("/etag", "busy", content_type="text/plain", status=500)
    del site.pages[(HOST, "/old")]
    await rerun(client, org, kb, crawl)
    assert await run_crawls() == {"completed": 1}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"] == {"found": 5, "read": 0, "unchanged": 3, "failed": 1, "skipped": 0, "retired": 1}
    assert got["problems"] == [{"url": f"https://{HOST}/etag", "reason": "the server answered HTTP 500"}]
    # /old answered 404 and went; /deep was not reached but /etag may still link to it.
    assert f"https://{HOST}/deep" in await pages(engine, crawl["id"])
    assert got["documents"] == 5


async def test_a_page_that_fails_for_now_takes_no_page_read_in_the_same_run(
    client, org, engine, site, run_crawls, ingest
):
    site.html("/", "Home", "Welcome to the help centre.", links=("/parking", "/busy"))
    site.html("/parking", "Parking", "Park on level two.")
    site.page("/busy", "busy", content_type="text/plain", status=503)
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"] == {"found": 3, "read": 2, "unchanged": 0, "failed": 1, "skipped": 0, "retired": 0}
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/parking"}

    # Again, with a page new since: it stays too, though /busy still fails.
    site.html("/", "Home", "Welcome to the help centre.", links=("/parking", "/busy", "/new"))
    site.html("/new", "New", "A new page.")
    await rerun(client, org, kb, crawl)
    assert await run_crawls() == {"completed": 1}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert (got["progress"]["failed"], got["progress"]["retired"], got["documents"]) == (1, 0, 3)
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/parking", f"https://{HOST}/new"}
    assert await ingest() == {"ready": 3}


async def test_a_validator_too_long_to_keep_is_dropped_not_stored(client, org, engine, site, run_crawls):
    # Longer than its column: storing it failed the whole crawl, every run.
    site.html("/", "Home", "Welcome.", links=("/dated",))
    site.html("/dated", "Hours", "We open at nine.", etag=False, last_modified="Wed, " + "9" * 200)
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/dated"}
    await rerun(client, org, kb, crawl)
    assert await run_crawls() == {"completed": 1}
    dated = [s for s in site.sent if s.path == "/dated"]
    assert [s.headers.get("If-Modified-Since") for s in dated] == [None, None]


async def test_scheduled_recrawl_runs_when_due(client, org, engine, site, run_crawls, ingest):
    kb, crawl = await crawl_and_index(client, org, site, run_crawls, ingest, sync_interval_s=3600)
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["sync_interval_s"] == 3600
    assert got["next_run_at"] is not None
    first = len(site.sent)
    # Not due yet: nothing runs.
    assert await run_crawls() == {}
    assert len(site.sent) == first
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE crawls SET next_run_at = now() - interval '1 second'"))
    assert await run_crawls() == {"completed": 1}
    assert [s.path for s in site.sent[first:]] == ["/robots.txt", "/", "/etag", "/dated", "/plain", "/old"]
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"]["unchanged"] == 5
    assert await ingest() == {}
