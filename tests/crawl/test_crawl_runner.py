"""A crawl run against a fake site: sitemaps, links, depth, patterns, limits, robots.txt,
redirects, cancel, leases, and the end-of-run hook."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import text

from app.crawl import runner as runner_module
from tests.crawl.conftest import HOST
from tests.helpers import create_kb

START = f"https://{HOST}/"
SITEMAP = '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{}</urlset>'
INDEX = (
    '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{}</sitemapindex>'
)


def urlset(*paths: str) -> str:
    return SITEMAP.format("".join(f"<url><loc>https://{HOST}{p}</loc></url>" for p in paths))


async def start_crawl(client: Any, org: Any, kb_id: str, **body: Any) -> dict[str, Any]:
    r = await client.post(f"/api/knowledge/{kb_id}/crawls", json={"url": START, **body}, headers=org.headers)
    assert r.status_code == 202, r.text
    crawl: dict[str, Any] = r.json()
    return crawl


async def get_crawl(client: Any, org: Any, kb_id: str, crawl_id: str) -> dict[str, Any]:
    r = await client.get(f"/api/knowledge/{kb_id}/crawls/{crawl_id}", headers=org.headers)
    assert r.status_code == 200, r.text
    crawl: dict[str, Any] = r.json()
    return crawl


async def pages(engine: Any, crawl_id: str) -> dict[str, str]:
    """URL -> title of the crawl's documents."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT source_url, title FROM documents WHERE crawl_id = :c"), {"c": crawl_id}
        )
        return {r.source_url: r.title for r in rows}


async def test_sitemap_index_and_links_become_documents(client, org, engine, site, run_crawls, ingest):
    site.page("/robots.txt", f"User-agent: *\nAllow: /\nSitemap: https://{HOST}/sitemap-index.xml\n",
              content_type="text/plain")  # fmt: skip
    site.page(
        "/sitemap-index.xml",
        INDEX.format(f"<sitemap><loc>https://{HOST}/sitemap-1.xml</loc></sitemap>"),
        content_type="application/xml",
    )
    site.page("/sitemap-1.xml", urlset("/parking", "/hours"), content_type="text/xml")
    site.html("/", "Home", "Welcome to the help centre.", links=("/parking", "lockers#top", "mailto:x@y.z"))
    site.html("/parking", "Parking", "Park on level two.")
    site.html("/hours", "Opening hours", "We open at nine.")
    site.html("/lockers", "Lockers", "Lockers are by the entrance.", links=("https://other.example.org/x",))
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"])
    assert crawl["status"] == "queued"

    assert await run_crawls() == {"completed": 1}

    assert site.paths() == [
        "/robots.txt",
        "/sitemap-index.xml",
        "/sitemap-1.xml",
        "/",
        "/parking",
        "/hours",
        "/lockers",
    ]
    assert {s.headers["User-Agent"] for s in site.sent} == {"voice-knowledge-fetcher/1.0"}
    assert all("If-None-Match" not in s.headers for s in site.sent)
    assert await pages(engine, crawl["id"]) == {
        START: "Home",
        f"https://{HOST}/parking": "Parking",
        f"https://{HOST}/hours": "Opening hours",
        f"https://{HOST}/lockers": "Lockers",
    }
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["status"] == "completed"
    assert got["progress"] == {"found": 4, "read": 4, "unchanged": 0, "failed": 0, "skipped": 0, "retired": 0}
    assert got["documents"] == 4
    assert got["started_at"] is not None
    assert got["finished_at"] is not None
    assert got["next_run_at"] is None

    # The pages are indexed from the fetched bytes: no second request.
    assert await ingest() == {"ready": 4}
    assert len(site.sent) == 7
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{await _doc_id(engine, f'https://{HOST}/parking')}",
                         headers=org.headers)  # fmt: skip
    assert r.json()["status"] == "ready"
    assert r.json()["chunk_count"] == 1


async def _doc_id(engine: Any, url: str) -> str:
    async with engine.connect() as conn:
        return str(
            (
                await conn.execute(text("SELECT id FROM documents WHERE source_url = :u"), {"u": url})
            ).scalar_one()
        )


async def test_robots_sitemap_absent_falls_back_to_sitemap_xml(client, org, engine, site, run_crawls):
    site.page("/sitemap.xml", urlset("/faq"), content_type="application/xml")
    site.html("/", "Home", "Home page.")
    site.html("/faq", "FAQ", "Questions.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"])
    assert await run_crawls() == {"completed": 1}
    # No robots.txt (404) means no rules.
    assert site.paths() == ["/robots.txt", "/sitemap.xml", "/", "/faq"]
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/faq"}


async def test_depth_limits_how_far_links_are_followed(client, org, engine, site, run_crawls):
    site.html("/", "Home", "Home page.", links=("/a",))
    site.html("/a", "A", "Page a.", links=("/b",))
    site.html("/b", "B", "Page b.", links=("/c",))
    site.html("/c", "C", "Page c.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], max_depth=1, use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    assert site.paths() == ["/robots.txt", "/", "/a"]
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/a"}


async def test_include_and_exclude_patterns_choose_the_pages(client, org, engine, site, run_crawls):
    site.html("/", "Home", "Home page.", links=("/docs/setup", "/docs/internal/keys", "/blog/news", "/docs"))
    site.html("/docs/setup", "Setup", "Install it.")
    site.html("/docs/internal/keys", "Keys", "Secret keys.")
    site.html("/blog/news", "News", "News.")
    site.html("/docs", "Docs", "Docs index.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(
        client,
        org,
        kb["id"],
        use_sitemap=False,
        include_patterns=["/docs/*"],
        exclude_patterns=["/docs/internal/*"],
    )
    assert await run_crawls() == {"completed": 1}
    # The start page is read for its links but kept only if the patterns allow it.
    assert site.paths() == ["/robots.txt", "/", "/docs/setup"]
    assert set(await pages(engine, crawl["id"])) == {f"https://{HOST}/docs/setup"}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"]["found"] == 2


async def test_max_pages_stops_the_crawl(client, org, engine, site, run_crawls):
    site.html("/", "Home", "Home page.", links=("/1", "/2", "/3", "/4"))
    for n in range(1, 5):
        site.html(f"/{n}", f"Page {n}", f"Text {n}.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False, max_pages=3)
    assert await run_crawls() == {"completed": 1}
    assert site.paths() == ["/robots.txt", "/", "/1", "/2"]
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/1", f"https://{HOST}/2"}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"] == {"found": 5, "read": 3, "unchanged": 0, "failed": 0, "skipped": 0, "retired": 0}


async def test_robots_disallow_is_honoured(client, org, engine, site, run_crawls):
    site.page(
        "/robots.txt",
        "User-agent: voice-knowledge-fetcher\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n",
        content_type="text/plain",
    )
    site.html("/", "Home", "Home page.", links=("/private/a", "/public"))
    site.html("/private/a", "Private", "Hidden.")
    site.html("/public", "Public", "Shown.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    assert site.paths() == ["/robots.txt", "/", "/public"]
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"]["skipped"] == 1
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/public"}


async def test_a_redirect_into_what_robots_disallows_is_not_kept(client, org, engine, site, run_crawls):
    site.page("/robots.txt", "User-agent: *\nDisallow: /private\n", content_type="text/plain")
    site.html("/", "Home", "Home page.", links=("/to-private", "/public"))
    site.page("/to-private", "", status=301, location=f"https://{HOST}/private/b")
    site.html("/private/b", "Private", "Hidden.")
    site.html("/public", "Public", "Shown.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"]["skipped"] == 1
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/public"}


async def test_robots_txt_server_error_fails_the_crawl_without_fetching_pages(client, org, site, run_crawls):
    site.page("/robots.txt", "down", content_type="text/plain", status=503)
    site.html("/", "Home", "Home page.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"])
    assert await run_crawls() == {"failed": 1}
    assert site.paths() == ["/robots.txt"]
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["error"] == (
        f"robots.txt of https://{HOST} could not be read (the server answered HTTP 503); "
        "the site is not crawled until it can be"
    )


async def test_redirect_to_a_private_address_is_refused(client, org, engine, site, run_crawls):
    site.html("/", "Home", "Home page.", links=("/moved", "/elsewhere", "/same"))
    site.page("/moved", "", status=301, location="http://10.0.0.5/admin")
    site.page("/elsewhere", "", status=302, location="https://other.example.org/page")
    site.page("/same", "", status=301, location=f"https://{HOST}/target")
    site.html("/target", "Target", "Moved here.")
    site.html("/page", "Other", "Another site.", host="other.example.org")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    # Nothing was sent to 10.0.0.5; the off-site redirect was followed (checked) but not kept.
    assert site.paths() == [
        "/robots.txt",
        "/",
        "/moved",
        "/elsewhere",
        "other.example.org/page",
        "/same",
        "/target",
    ]
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"] == {"found": 4, "read": 2, "unchanged": 0, "failed": 1, "skipped": 1, "retired": 0}
    assert got["problems"] == [
        {
            "url": f"https://{HOST}/moved",
            "reason": "refused: the address 10.0.0.5 is not allowed (private network; "
            "INGESTION__ALLOWED_HOSTS can allow this host)",
        }
    ]
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/target"}


async def test_non_html_and_duplicate_pages_are_skipped(client, org, engine, site, run_crawls):
    site.html("/", "Home", "Home page.", links=("/guide.pdf", "/notes.txt", "/copy", "/index.html"))
    site.page("/guide.pdf", b"%PDF-1.4", content_type="application/pdf")
    site.page("/notes.txt", "plain", content_type="text/plain")
    site.html("/copy", "Copy", "Same page twice.")
    site.html("/index.html", "Copy", "Same page twice.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"] == {"found": 5, "read": 2, "unchanged": 0, "failed": 0, "skipped": 3, "retired": 0}
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/copy"}


def _with_canonical(path: str, title: str, text: str, canonical: str) -> str:
    return (
        f'<html><head><title>{title}</title><link rel="canonical" href="{canonical}"></head>'
        f"<body><main><p>{text}</p></main></body></html>"
    )


async def test_one_page_at_two_addresses_is_kept_once_under_its_canonical(
    client, org, engine, site, run_crawls
):
    # A tracking parameter and a session token in the page: the bytes differ, the page does not.
    site.html("/", "Home", "Home page.", links=("/prices?utm_source=mail", "/prices", "/about"))
    site.page(
        "/prices?utm_source=mail", _with_canonical("/", "Prices", "Whitening 350 dollars. t=1", "/prices")
    )
    site.page("/prices", _with_canonical("/", "Prices", "Whitening 350 dollars. t=2", "/prices"))
    # Naming the home page as its canonical (a common mistake) does not make a page a copy of it.
    site.page("/about", _with_canonical("/", "About", "About us.", "/"))
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    assert await pages(engine, crawl["id"]) == {
        START: "Home",
        f"https://{HOST}/prices": "Prices",
        f"https://{HOST}/about": "About",
    }
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["progress"] == {"found": 4, "read": 3, "unchanged": 0, "failed": 0, "skipped": 1, "retired": 0}
    # The canonical address, already kept, is not fetched again.
    assert site.paths() == ["/robots.txt", "/", "/prices?utm_source=mail", "/about"]


async def test_cancel_stops_a_running_crawl_and_keeps_what_it_read(client, org, engine, site, runner):
    site.html("/", "Home", "Home page.", links=("/a", "/b"))
    site.html("/a", "A", "Page a.")
    site.html("/b", "B", "Page b.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    claimed = await runner.claim()
    assert str(claimed.id) == crawl["id"]
    r = await client.post(f"/api/knowledge/{kb['id']}/crawls/{crawl['id']}/cancel", headers=org.headers)
    assert r.status_code == 202
    assert (r.json()["status"], r.json()["cancel_requested"]) == ("running", True)

    assert await runner.run(claimed) == "cancelled"
    assert site.paths() == ["/robots.txt", "/"]
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert (got["status"], got["cancel_requested"], got["documents"]) == ("cancelled", False, 1)
    assert set(await pages(engine, crawl["id"])) == {START}


async def test_expired_lease_is_taken_over_and_the_stale_run_writes_nothing(
    client, org, engine, site, runner, run_crawls
):
    site.html("/", "Home", "Home page.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    stale = await runner.claim()
    # The worker holding it stopped renewing (a restart): its lease expires.
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE crawls SET lease_expires_at = now() - interval '1 second'"))
    assert await run_crawls() == {"completed": 1}
    assert await runner.run(stale) == "lost"
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert (got["status"], got["documents"], got["progress"]["read"]) == ("completed", 1, 1)


async def test_crawl_finished_hook_sees_each_run_once(client, org, site, run_crawls, monkeypatch):
    seen: list[Any] = []

    async def record(conn: Any, crawl: Any) -> None:
        seen.append(crawl)

    monkeypatch.setattr(runner_module, "crawl_finished", record)
    site.html("/", "Home", "Home page.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    assert [(str(c.id), c.status, c.pages_read, c.kb_id.hex) for c in seen] == [
        (crawl["id"], "completed", 1, kb["id"].replace("-", ""))
    ]


async def test_a_finished_run_is_a_crawl_completed_webhook_event(client, org, engine, site, run_crawls):
    r = await client.post(
        "/api/webhooks",
        json={"url": "https://hooks.example.com/vk", "events": ["crawl.completed"]},
        headers=org.headers,
    )
    assert r.status_code == 201, r.text
    site.html("/", "Home", "Home page.", links=("/a",))
    site.html("/a", "A", "Page a.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    assert await run_crawls() == {"completed": 1}
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT e.type, e.data, d.status FROM webhook_events e"
                    " JOIN webhook_deliveries d ON d.event_id = e.id WHERE e.org_id = :o"
                ),
                {"o": org.id},
            )
        ).all()
    assert len(rows) == 1
    event_type, data, delivery_status = rows[0]
    assert (event_type, delivery_status) == ("crawl.completed", "pending")
    assert {k: data[k] for k in ("crawl_id", "kb_id", "status", "error", "pages_read", "pages_failed")} == {
        "crawl_id": crawl["id"],
        "kb_id": kb["id"],
        "status": "completed",
        "error": None,
        "pages_read": 2,
        "pages_failed": 0,
    }
    assert data["start_url"] == crawl["start_url"]


async def test_pause_between_requests_to_one_host(client, org, engine, crawl_settings, site):
    from app.crawl.runner import CrawlRunner, drain_crawls
    from tests.conftest import fake_resolver

    slow = crawl_settings.model_copy(
        update={"crawl": crawl_settings.crawl.model_copy(update={"delay_s": 5.0})}
    )
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    site.page("/robots.txt", "User-agent: *\nCrawl-delay: 7\n", content_type="text/plain")
    site.html("/", "Home", "Home page.", links=("/a",))
    site.html("/a", "A", "Page a.")
    kb = await create_kb(client, org.headers)
    await start_crawl(client, org, kb["id"], use_sitemap=False)
    crawler = CrawlRunner(engine, slow, "polite", resolver=fake_resolver, sleep=sleep)
    try:
        assert await drain_crawls(crawler) == {"completed": 1}
    finally:
        await crawler.aclose()
    # robots.txt, then / and /a: two pauses, each the longer of the setting and Crawl-delay
    # less the moment the previous request took.
    assert len(pauses) == 2
    assert all(6.0 < p <= 7.0 for p in pauses)


async def test_a_crawl_delay_of_hundreds_of_digits_is_the_longest_pause(
    client, org, engine, crawl_settings, site
):
    from app.crawl.runner import MAX_CRAWL_DELAY_S, CrawlRunner, drain_crawls
    from tests.conftest import fake_resolver

    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    # Too large for a float: the run failed with OverflowError.
    site.page("/robots.txt", "User-agent: *\nCrawl-delay: " + "9" * 400 + "\n", content_type="text/plain")
    site.html("/", "Home", "Home page.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    crawler = CrawlRunner(engine, crawl_settings, "polite", resolver=fake_resolver, sleep=sleep)
    try:
        assert await drain_crawls(crawler) == {"completed": 1}
    finally:
        await crawler.aclose()
    assert len(pauses) == 1
    assert MAX_CRAWL_DELAY_S - 1.0 < pauses[0] <= MAX_CRAWL_DELAY_S
    assert set(await pages(engine, crawl["id"])) == {START}


async def test_the_knowledge_base_document_limit_fails_the_run_keeping_what_fits(
    client, org, engine, crawl_settings, site
):
    from app.crawl.runner import CrawlRunner, drain_crawls
    from tests.conftest import fake_resolver

    limited = crawl_settings.model_copy(
        update={"limits": crawl_settings.limits.model_copy(update={"documents_per_kb": 3})}
    )
    site.html("/", "Home", "Home page.", links=("/a", "/b", "/c"))
    for name in "abc":
        site.html(f"/{name}", name.upper(), f"Page {name}.")
    kb = await create_kb(client, org.headers)
    await client.post(
        f"/api/knowledge/{kb['id']}/documents", json={"title": "Own", "content": "Mine."}, headers=org.headers
    )
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    crawler = CrawlRunner(engine, limited, "limited", resolver=fake_resolver)
    try:
        assert await drain_crawls(crawler) == {"failed": 1}
    finally:
        await crawler.aclose()
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert got["error"] == "the knowledge base holds the maximum of 3 documents"
    assert (got["documents"], got["progress"]["read"]) == (2, 2)
    assert set(await pages(engine, crawl["id"])) == {START, f"https://{HOST}/a"}


async def test_a_stopping_worker_hands_its_crawl_back_to_the_queue(
    client, org, engine, crawl_settings, site, run_crawls
):
    from app.crawl.runner import CrawlLoop, CrawlRunner
    from tests.conftest import fake_resolver

    site.html("/", "Home", "Home page.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    crawler = CrawlRunner(engine, crawl_settings, "stopping", resolver=fake_resolver)
    assert await crawler.claim() is not None
    assert (await get_crawl(client, org, kb["id"], crawl["id"]))["status"] == "running"
    await CrawlLoop(crawler, concurrency=1, poll_interval_s=0.1).stop()
    # Queued again at once, not after the lease expires: another worker takes it now.
    assert (await get_crawl(client, org, kb["id"], crawl["id"]))["status"] == "queued"
    assert await run_crawls() == {"completed": 1}
    assert site.paths() == ["/robots.txt", "/"]


async def test_cancel_cuts_a_long_crawl_delay_short(client, org, engine, crawl_settings, site):
    from app.crawl.runner import CrawlRunner
    from tests.conftest import fake_resolver

    # The lease renewed every 1.7 s: the heartbeat hears the cancel within that.
    quick = crawl_settings.model_copy(
        update={"ingestion": crawl_settings.ingestion.model_copy(update={"lease_s": 5.0})}
    )
    pausing = asyncio.Event()

    async def sleep(seconds: float) -> None:
        # A Crawl-delay of a minute that never ends by itself: only the cancel ends the run.
        pausing.set()
        await asyncio.Event().wait()

    site.page("/robots.txt", "User-agent: *\nCrawl-delay: 60\n", content_type="text/plain")
    site.html("/", "Home", "Home page.", links=("/a",))
    site.html("/a", "A", "Page a.")
    kb = await create_kb(client, org.headers)
    crawl = await start_crawl(client, org, kb["id"], use_sitemap=False)
    crawler = CrawlRunner(engine, quick, "polite", resolver=fake_resolver, sleep=sleep)
    try:
        claimed = await crawler.claim()
        run = asyncio.ensure_future(crawler.run(claimed))
        await asyncio.wait_for(pausing.wait(), 30)
        r = await client.post(f"/api/knowledge/{kb['id']}/crawls/{crawl['id']}/cancel", headers=org.headers)
        assert r.status_code == 202
        assert await asyncio.wait_for(run, 30) == "cancelled"
    finally:
        await crawler.aclose()
    got = await get_crawl(client, org, kb["id"], crawl["id"])
    assert (got["status"], got["cancel_requested"]) == ("cancelled", False)
    # The pause came after robots.txt, before the home page.
    assert site.paths() == ["/robots.txt"]
