"""Running crawls in the worker process: take a queued crawl, walk its site, keep its pages.

A run reads robots.txt, then the sitemaps (robots.txt ``Sitemap:`` lines, else
``/sitemap.xml``), then follows links breadth first, one request at a time with a pause per
host. Each page is fetched conditionally (the ETag and Last-Modified an earlier run stored),
so an unchanged site answers 304s; a page whose bytes hash as before is unchanged too. Only
new or changed pages become pending documents, which the ingestion workers index from the
stored bytes (no second fetch). A completed run retires the pages of earlier runs it did not
keep (gone with 404/410, or no longer reachable); a failed or cancelled run retires nothing.

Every fetch goes through the service's SSRF-checked fetcher, redirects included.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import urllib.robotparser
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.crawl import repository as sql
from app.crawl.events import FinishedCrawl, crawl_finished
from app.crawl.site import (
    CRAWL_TYPES,
    HTML_TYPES,
    ROBOTS_AGENT,
    SITEMAP_TYPES,
    PathFilter,
    SitemapError,
    normalise_url,
    parse_page,
    parse_robots,
    parse_sitemap,
    same_page_canonical,
    same_site,
)
from app.db.engine import raw_connection
from app.db.leasing import release_leases, stop_loops
from app.ingestion.fetch import BlockedURL, Fetcher, FetchError, FetchResult, Resolver, UnsupportedContentType

log = logging.getLogger(__name__)

MAX_PROBLEMS = 20
MAX_CRAWL_DELAY_S = 60.0
# URLs a run may hold in its frontier, as a multiple of max_pages: enough for the pages that
# turn out skipped or failed, bounded against a sitemap of millions.
FOUND_PER_PAGE = 5
GONE = frozenset({404, 410})

RELEASE_SQL = """
UPDATE crawls
SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0)
WHERE starts_with(lease_owner, $1 || '/') AND status = 'running'
"""

RENEW_SQL = """
UPDATE crawls SET lease_expires_at = now() + make_interval(secs => $3)
WHERE id = $1 AND lease_owner = $2
RETURNING cancel_requested
"""


class CrawlFailed(Exception):
    """The run cannot go on; ``str(exc)`` is the crawl's error for the admin."""


class _LeaseLost(Exception):
    pass


class _Cancelled(Exception):
    pass


@dataclass(slots=True)
class ClaimedCrawl:
    id: uuid.UUID
    lease: str
    org_id: uuid.UUID
    kb_id: uuid.UUID
    start_url: str
    max_depth: int
    max_pages: int
    include_patterns: list[str]
    exclude_patterns: list[str]
    use_sitemap: bool
    cancel_requested: bool

    @classmethod
    def from_row(cls, row: Any) -> ClaimedCrawl:
        return cls(**{name: row[name] for name in cls.__slots__})


@dataclass(frozen=True, slots=True)
class KnownPage:
    id: uuid.UUID
    etag: str | None
    last_modified: str | None
    content_hash: str | None


@dataclass(slots=True)
class _Run:
    """One run of one crawl: its frontier, what it kept, and its counts."""

    crawl: ClaimedCrawl
    known: dict[str, KnownPage]
    paths: PathFilter
    frontier: deque[tuple[str, int]] = field(default_factory=deque)
    seen: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)  # page URLs whose documents stay
    gone: set[str] = field(default_factory=set)  # known pages that answered 404 or 410
    interrupted: bool = False  # a page failed for a passing reason: what it links to is unknown
    hashes: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("found", "read", "unchanged", "failed", "skipped"), 0)
    )
    problems: list[dict[str, str]] = field(default_factory=list)
    robots: dict[str, urllib.robotparser.RobotFileParser | None] = field(default_factory=dict)
    cancelled: bool = False
    lost: bool = False
    # Set with ``cancelled`` or ``lost`` by the heartbeat: it cuts a pause short.
    stopped: asyncio.Event = field(default_factory=asyncio.Event)

    def problem(self, url: str, reason: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append({"url": url[:2048], "reason": reason[:500]})


class CrawlRunner:
    """Takes crawls from the queue and runs them; one run at a time per call of ``run``."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: Settings,
        owner: str,
        *,
        resolver: Resolver | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.owner = owner
        self.sleep = sleep
        self.intranet = settings.ingestion.intranet
        # Its own fetcher for the media types a crawl reads (robots.txt and sitemaps beside
        # HTML); the same SSRF checks, limits and intranet settings as URL documents.
        self.fetcher = Fetcher(
            resolver=resolver,
            max_bytes=settings.ingestion.fetch_max_bytes,
            timeout_s=settings.ingestion.fetch_timeout_s,
            allowed_types=CRAWL_TYPES,
            intranet=self.intranet,
        )
        # Shared by the runs of this process: two crawls of one host keep the pause between them.
        self._last_request: dict[str, float] = {}

    async def aclose(self) -> None:
        await self.fetcher.aclose()

    async def maintenance(self) -> None:
        async with raw_connection(self.engine) as conn:
            await conn.execute(sql.GIVE_UP_SQL, self.settings.ingestion.max_attempts)
            await conn.execute(sql.DUE_SQL)

    async def claim(self) -> ClaimedCrawl | None:
        lease = f"{self.owner}/{uuid.uuid4().hex[:12]}"
        async with raw_connection(self.engine) as conn:
            row = await conn.fetchrow(
                sql.CLAIM_SQL, lease, self.settings.ingestion.lease_s, self.settings.ingestion.max_attempts
            )
        return ClaimedCrawl.from_row(row) if row else None

    async def run(self, crawl: ClaimedCrawl) -> str:
        """Run a claimed crawl to its end; returns the final status (or ``lost``). Never raises
        for anything the site does."""
        async with raw_connection(self.engine) as conn:
            rows = await conn.fetch(sql.PAGES_SQL, crawl.id)
        run = _Run(
            crawl=crawl,
            known={
                r["source_url"]: KnownPage(r["id"], r["etag"], r["last_modified"], r["content_hash"])
                for r in rows
            },
            paths=PathFilter(tuple(crawl.include_patterns), tuple(crawl.exclude_patterns)),
        )
        heartbeat = asyncio.create_task(self._heartbeat(run))
        status, error = "completed", None
        try:
            await self._walk(run)
        except _LeaseLost:
            log.warning("lease on crawl %s lost; another worker owns it now", crawl.id)
            return "lost"
        except _Cancelled:
            status = "cancelled"
        except CrawlFailed as exc:
            status, error = "failed", str(exc)
        except Exception as exc:
            # The worker must outlive any site.
            log.exception("unexpected error while crawling %s", crawl.id)
            status, error = "failed", f"unexpected error: {type(exc).__name__}"
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        return await self._finish(run, status, error)

    # --- the walk ---------------------------------------------------------------------------

    async def _walk(self, run: _Run) -> None:
        crawl = run.crawl
        start = normalise_url(crawl.start_url, intranet=self.intranet)
        if start is None:
            raise CrawlFailed("the start URL is not valid")
        sitemaps = await self._read_robots(run, start)
        self._add(run, start, 0, start=start)
        if crawl.use_sitemap and crawl.max_depth >= 1:
            await self._read_sitemaps(run, start, sitemaps)
        while run.frontier and len(run.kept) < crawl.max_pages:
            url, depth = run.frontier.popleft()
            await self._visit(run, url, depth, start)
            await self._progress(run)
        if not run.kept and run.counts["failed"]:
            first = run.problems[0] if run.problems else {"url": start, "reason": "unknown"}
            raise CrawlFailed(f"no page could be read; {first['url']}: {first['reason']}")

    def _add(self, run: _Run, url: str, depth: int, *, start: str) -> None:
        if url in run.seen or not same_site(url, start):
            return
        if url != start and not run.paths.allows(url):
            return
        if len(run.seen) >= run.crawl.max_pages * FOUND_PER_PAGE:
            return
        run.seen.add(url)
        run.counts["found"] += 1
        run.frontier.append((url, depth))

    async def _visit(self, run: _Run, url: str, depth: int, start: str) -> None:
        if url in run.kept:
            # Kept already under its canonical address, read at another one.
            run.counts["skipped"] += 1
            return
        if not await self._allowed_by_robots(run, url):
            run.counts["skipped"] += 1
            return
        known = run.known.get(url)
        try:
            result = await self._fetch(
                run,
                url,
                etag=known.etag if known else None,
                last_modified=known.last_modified if known else None,
            )
        except UnsupportedContentType:
            run.counts["skipped"] += 1
            return
        except BlockedURL as exc:
            if url == start:
                raise CrawlFailed(f"the start page cannot be fetched: {exc}") from exc
            run.counts["failed"] += 1
            run.problem(url, f"refused: {exc}")
            return
        except FetchError as exc:
            if url == start:
                # Without it nothing tells which pages are still on the site.
                raise CrawlFailed(f"the start page could not be read: {exc}") from exc
            if exc.status in GONE and known is not None:
                run.gone.add(url)
                return
            run.counts["failed"] += 1
            run.problem(url, str(exc))
            if exc.status not in GONE:
                run.interrupted = True
                if known is not None:
                    run.kept.add(url)  # a passing failure does not take the page away
            return
        if result.status == 304 and known is not None:
            run.counts["unchanged"] += 1
            run.kept.add(url)
            if known.content_hash:
                run.hashes.add(known.content_hash)
            if depth < run.crawl.max_depth:
                # The links are in the bytes an earlier run stored: read them there.
                async with raw_connection(self.engine) as conn:
                    stored = await conn.fetchval(sql.ORIGINAL_SQL, known.id)
                if stored:
                    page = await asyncio.to_thread(parse_page, stored, None, url, self.intranet)
                    for link in page.links:
                        self._add(run, link, depth + 1, start=start)
            return
        page_url = normalise_url(result.url, intranet=self.intranet) or url
        if page_url != url:
            if not same_site(page_url, start):
                run.counts["skipped"] += 1
                return
            if page_url in run.seen:
                # Another URL of this run is (or will be) this page.
                run.counts["skipped"] += 1
                return
            run.seen.add(page_url)
            if not await self._allowed_by_robots(run, page_url):
                # Redirected to a page robots.txt keeps crawlers from: read, but not kept.
                run.counts["skipped"] += 1
                return
        if result.content_type not in HTML_TYPES:
            run.counts["skipped"] += 1
            return
        page = await asyncio.to_thread(parse_page, result.content, result.charset, page_url, self.intranet)
        if depth < run.crawl.max_depth:
            for link in page.links:
                self._add(run, link, depth + 1, start=start)
        if not run.paths.allows(page_url):
            return  # the start page, read for its links only
        canonical = same_page_canonical(page.canonical, page_url)
        if canonical is not None:
            # This page at another address ("?utm_source=..."): kept once, under the address
            # the site names, even when the two copies differ by a token or a timestamp.
            if canonical in run.kept:
                run.counts["skipped"] += 1
                return
            if run.paths.allows(canonical) and await self._allowed_by_robots(run, canonical):
                page_url = canonical
                run.seen.add(canonical)
        digest = hashlib.sha256(result.content).hexdigest()
        if digest in run.hashes:
            run.counts["skipped"] += 1
            return
        run.hashes.add(digest)
        known = run.known.get(page_url)
        if known is not None and known.content_hash == digest:
            async with raw_connection(self.engine) as conn:
                await conn.execute(sql.TOUCH_PAGE_SQL, known.id, result.etag, result.last_modified)
            run.counts["unchanged"] += 1
        else:
            await self._store(run, page_url, page.title or page_url[:300], result, digest, known)
            run.counts["read"] += 1
        run.kept.add(page_url)

    async def _store(
        self, run: _Run, url: str, title: str, result: FetchResult, digest: str, known: KnownPage | None
    ) -> None:
        crawl, limits = run.crawl, self.settings.limits
        doc_id = known.id if known is not None else uuid.uuid4()
        # Locks in the order an upload takes them (organisation, then KB), so the quotas
        # hold against concurrent uploads; the crawl's row fences a runner that lost its lease.
        async with raw_connection(self.engine) as conn, conn.transaction():
            await conn.execute(sql.LOCK_ORG_SQL, crawl.org_id)
            if await conn.fetchval(sql.LOCK_LEASED_SQL, crawl.id, crawl.lease) is None:
                raise _LeaseLost
            others = await conn.fetchval(sql.STORED_BYTES_SQL, crawl.org_id, doc_id)
            if others + len(result.content) > limits.org_storage_bytes:
                raise CrawlFailed(
                    f"the organisation's storage quota of {limits.org_storage_bytes // 1024**2} MB"
                    f" would be exceeded by {url}"
                )
            if known is None:
                await conn.execute(sql.LOCK_KB_SQL, crawl.kb_id)
                if await conn.fetchval(sql.KB_DOCUMENTS_SQL, crawl.kb_id) >= limits.documents_per_kb:
                    raise CrawlFailed(
                        f"the knowledge base holds the maximum of {limits.documents_per_kb} documents"
                    )
                await conn.execute(
                    sql.INSERT_PAGE_SQL,
                    doc_id,
                    crawl.org_id,
                    crawl.kb_id,
                    crawl.id,
                    title,
                    url,
                    result.content,
                    digest,
                    result.etag,
                    result.last_modified,
                )
            else:
                await conn.execute(
                    sql.UPDATE_PAGE_SQL,
                    doc_id,
                    result.content,
                    digest,
                    title,
                    result.etag,
                    result.last_modified,
                )

    # --- robots.txt and sitemaps -------------------------------------------------------------

    async def _read_robots(self, run: _Run, start: str) -> list[str]:
        """Read the start host's robots.txt; its Sitemap: lines come back. A robots.txt that
        cannot be read for a passing reason stops the crawl: RFC 9309 reads that as
        "disallow all" until it can be read."""
        parser = await self._robots_for(run, start, strict=True)
        return list(parser.site_maps() or []) if parser is not None else []

    async def _allowed_by_robots(self, run: _Run, url: str) -> bool:
        parser = await self._robots_for(run, url, strict=False)
        return parser is None or parser.can_fetch(ROBOTS_AGENT, url)

    async def _robots_for(
        self, run: _Run, url: str, *, strict: bool
    ) -> urllib.robotparser.RobotFileParser | None:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin in run.robots:
            return run.robots[origin]
        robots_url = f"{origin}/robots.txt"
        parser: urllib.robotparser.RobotFileParser | None = None
        try:
            result = await self._fetch(run, robots_url)
        except UnsupportedContentType:
            pass  # an HTML "not found" page served as robots.txt: no rules
        except BlockedURL as exc:
            raise CrawlFailed(f"this URL cannot be fetched: {exc}") from exc
        except FetchError as exc:
            if exc.status is None or exc.status >= 500 or exc.status == 429:
                reason = f"robots.txt of {origin} could not be read ({exc})"
                if strict:
                    raise CrawlFailed(f"{reason}; the site is not crawled until it can be") from exc
                run.problem(robots_url, reason)
                parser = urllib.robotparser.RobotFileParser()
                parser.parse(["User-agent: *", "Disallow: /"])
            # Any other 4xx: there are no rules (RFC 9309).
        else:
            if result.content_type in ("text/plain", ""):
                parser = parse_robots(result.content)
        run.robots[origin] = parser
        return parser

    async def _read_sitemaps(self, run: _Run, start: str, listed: list[str]) -> None:
        candidates = [normalise_url(url, intranet=self.intranet) for url in listed]
        queue = deque(url for url in candidates if url is not None and same_site(url, start))
        if not queue:
            parts = urlsplit(start)
            queue.append(f"{parts.scheme}://{parts.netloc}/sitemap.xml")
        read: set[str] = set()
        cap = run.crawl.max_pages * FOUND_PER_PAGE
        while queue and len(read) < self.settings.crawl.max_sitemaps:
            url = queue.popleft()
            if url in read:
                continue
            read.add(url)
            try:
                result = await self._fetch(run, url)
                if result.content_type not in SITEMAP_TYPES:
                    raise SitemapError(f"the content type {result.content_type} is not a sitemap")
                sitemap = await asyncio.to_thread(parse_sitemap, result.content, max_urls=cap)
            except FetchError as exc:
                if exc.status not in GONE:  # no sitemap.xml is the usual case, not a problem
                    run.problem(url, f"sitemap: {exc}")
                continue
            except (BlockedURL, SitemapError) as exc:
                run.problem(url, f"sitemap: {exc}")
                continue
            for page in sitemap.pages:
                normalised = normalise_url(page, intranet=self.intranet)
                if normalised is not None:
                    self._add(run, normalised, 1, start=start)
            for nested in sitemap.sitemaps:
                normalised = normalise_url(nested, intranet=self.intranet)
                if normalised is not None and same_site(normalised, start):
                    queue.append(normalised)
            await self._progress(run)

    # --- fetching, politely ------------------------------------------------------------------

    async def _fetch(
        self, run: _Run, url: str, *, etag: str | None = None, last_modified: str | None = None
    ) -> FetchResult:
        parts = urlsplit(url)
        host = parts.netloc
        delay = self.settings.crawl.delay_s
        parser = run.robots.get(f"{parts.scheme}://{host}")
        if parser is not None:
            robots_delay = parser.crawl_delay(ROBOTS_AGENT)
            if robots_delay:
                # An int (typeshed says str), compared before float(): a delay of 400 digits
                # is no float (OverflowError).
                delay = max(delay, float(min(int(robots_delay), MAX_CRAWL_DELAY_S)))
        last = self._last_request.get(host)
        if last is not None:
            wait = last + delay - time.monotonic()
            if wait > 0:
                await self._pause(run, wait)
        self._last_request[host] = time.monotonic()
        return await self.fetcher.fetch(url, etag=etag, last_modified=last_modified)

    async def _pause(self, run: _Run, seconds: float) -> None:
        """The pause between two requests to one host, cut short when the run is cancelled or
        its lease lost: a robots.txt Crawl-delay may ask for a minute a page."""
        pause = asyncio.ensure_future(self.sleep(seconds))
        stop = asyncio.ensure_future(run.stopped.wait())
        try:
            await asyncio.wait({pause, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            pause.cancel()
            stop.cancel()
        if run.lost:
            raise _LeaseLost
        if run.cancelled:
            raise _Cancelled

    # --- progress, lease and the end of a run ------------------------------------------------

    async def _progress(self, run: _Run) -> None:
        if run.lost:
            raise _LeaseLost
        c = run.counts
        async with raw_connection(self.engine) as conn:
            row = await conn.fetchrow(
                sql.PROGRESS_SQL,
                run.crawl.id,
                run.crawl.lease,
                c["found"],
                c["read"],
                c["unchanged"],
                c["failed"],
                c["skipped"],
                json.dumps(run.problems),
                self.settings.ingestion.lease_s,
            )
        if row is None:
            raise _LeaseLost
        if row["cancel_requested"] or run.cancelled:
            raise _Cancelled

    async def _heartbeat(self, run: _Run) -> None:
        # Progress writes renew the lease after every page; this covers a long single step.
        interval = max(1.0, self.settings.ingestion.lease_s / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                async with raw_connection(self.engine) as conn:
                    row = await conn.fetchrow(
                        RENEW_SQL, run.crawl.id, run.crawl.lease, self.settings.ingestion.lease_s
                    )
            except Exception:  # noqa: BLE001 - a missed renewal is retried at the next beat
                log.warning("could not renew lease on crawl %s", run.crawl.id)
                continue
            if row is None:
                run.lost = True
                run.stopped.set()
                return
            run.cancelled = bool(row["cancel_requested"])
            if run.cancelled:
                run.stopped.set()

    async def _finish(self, run: _Run, status: str, error: str | None) -> str:
        crawl, c = run.crawl, run.counts
        async with raw_connection(self.engine) as conn, conn.transaction():
            if await conn.fetchval(sql.LOCK_LEASED_SQL, crawl.id, crawl.lease) is None:
                return "lost"
            retired = 0
            if status == "completed":
                # Pages that are gone always go; pages merely not reached only when no page
                # failed on the way (the links of a page that failed are unknown). What this
                # run read stays either way.
                keep = (set(run.known) - run.gone) | run.kept if run.interrupted else run.kept
                deleted = await conn.execute(sql.RETIRE_SQL, crawl.id, sorted(keep))
                retired = int(deleted.split()[-1])
            await conn.execute(
                sql.PROGRESS_SQL,
                crawl.id,
                crawl.lease,
                c["found"],
                c["read"],
                c["unchanged"],
                c["failed"],
                c["skipped"],
                json.dumps(run.problems),
                self.settings.ingestion.lease_s,
            )
            row = await conn.fetchrow(sql.FINISH_SQL, crawl.id, crawl.lease, status, error, retired)
            await crawl_finished(conn, FinishedCrawl.from_row(row))
        log.info("crawl %s %s: %s, %d retired", crawl.id, status, c, retired)
        return status


class CrawlLoop:
    """``concurrency`` loops in the worker process, each running one crawl at a time."""

    def __init__(self, runner: CrawlRunner, *, concurrency: int, poll_interval_s: float) -> None:
        self.runner = runner
        self.concurrency = concurrency
        self.poll_interval_s = poll_interval_s
        self.maintenance_s = 30.0
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._loop(i), name=f"crawl-{i}") for i in range(self.concurrency)]

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop taking crawls; a run still going after ``grace_s`` is released to the queue,
        to start again (cheaply: its pages are re-fetched conditionally) wherever it is taken."""
        self._stopping = True
        await stop_loops(self._tasks, grace_s=grace_s)
        await release_leases(self.runner.engine, RELEASE_SQL, self.runner.owner, what="crawl leases")
        await self.runner.aclose()

    async def _loop(self, index: int) -> None:
        next_maintenance = 0.0
        while not self._stopping:
            try:
                if index == 0 and time.monotonic() >= next_maintenance:
                    await self.runner.maintenance()
                    next_maintenance = time.monotonic() + self.maintenance_s
                crawl = await self.runner.claim()
            except Exception:
                log.warning("crawl loop %d could not claim work; retrying", index, exc_info=True)
                crawl = None
            if crawl is None:
                await asyncio.sleep(self.poll_interval_s)
                continue
            try:
                await self.runner.run(crawl)
            except Exception:
                # The database failed us mid-run: the lease expires and the crawl is retaken.
                log.warning("crawl %s stopped by an error; it will be retried", crawl.id, exc_info=True)


def start_crawls(
    engine: AsyncEngine, settings: Settings, owner: str, *, resolver: Resolver | None = None
) -> CrawlLoop | None:
    """The crawl loops a worker process runs beside its ingestion loops (None when
    CRAWL__WORKERS is 0); start them with ``await loop.start()``."""
    if settings.crawl.workers <= 0:
        return None
    runner = CrawlRunner(engine, settings, owner, resolver=resolver)
    return CrawlLoop(
        runner, concurrency=settings.crawl.workers, poll_interval_s=settings.crawl.poll_interval_s
    )


async def drain_crawls(runner: CrawlRunner, *, max_crawls: int = 100) -> dict[str, int]:
    """Run queued (and due) crawls until none is left (tests, benchmarks)."""
    counts: dict[str, int] = {}
    await runner.maintenance()
    for _ in range(max_crawls):
        crawl = await runner.claim()
        if crawl is None:
            break
        status = await runner.run(crawl)
        counts[status] = counts.get(status, 0) + 1
    return counts
