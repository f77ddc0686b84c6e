"""Crawls: accept a site to crawl, record it, and queue it for the worker process.

Nothing here fetches a page; the crawl runner in the worker does (app/crawl/runner.py), so
a new crawl answers at once with the crawl ``queued``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import CrawlSettings
from app.crawl.models import ACTIVE, Crawl
from app.crawl.repository import CrawlRepository
from app.crawl.schemas import CrawlCreate, CrawlProblem, CrawlProgress, CrawlRead
from app.crawl.site import normalise_url
from app.db.base import utcnow
from app.errors import BadRequest, Conflict, NotFound, ValidationFailed
from app.ingestion.fetch import BlockedURL, IntranetAccess
from app.knowledge.repository import KnowledgeRepository
from app.schemas import Page

CRAWL_NOT_FOUND = "crawl not found"
UrlValidator = Callable[[str], Awaitable[None]]


def to_read(crawl: Crawl, documents: int) -> CrawlRead:
    return CrawlRead(
        id=crawl.id,
        kb_id=crawl.kb_id,
        start_url=crawl.start_url,
        max_depth=crawl.max_depth,
        max_pages=crawl.max_pages,
        include_patterns=crawl.include_patterns,
        exclude_patterns=crawl.exclude_patterns,
        use_sitemap=crawl.use_sitemap,
        sync_interval_s=crawl.sync_interval_s,
        next_run_at=crawl.next_run_at,
        status=crawl.status,
        cancel_requested=crawl.cancel_requested,
        progress=CrawlProgress(
            found=crawl.pages_found,
            read=crawl.pages_read,
            unchanged=crawl.pages_unchanged,
            failed=crawl.pages_failed,
            skipped=crawl.pages_skipped,
            retired=crawl.pages_retired,
        ),
        problems=[CrawlProblem.model_validate(p) for p in crawl.problems],
        error=crawl.error,
        documents=documents,
        created_at=crawl.created_at,
        started_at=crawl.started_at,
        finished_at=crawl.finished_at,
    )


def _invalid(field: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"invalid request body: {field}", extra=[{"field": field, "message": message}])


class CrawlService:
    def __init__(
        self,
        session: AsyncSession,
        org_id: uuid.UUID,
        *,
        validate_url: UrlValidator,
        intranet: IntranetAccess,
        settings: CrawlSettings,
    ) -> None:
        self.session = session
        self.repo = CrawlRepository(session, org_id)
        self.kbs = KnowledgeRepository(session, org_id)
        self.validate_url = validate_url
        self.intranet = intranet
        self.settings = settings

    async def _read(self, crawl: Crawl) -> CrawlRead:
        counts = await self.repo.document_counts([crawl.id])
        return to_read(crawl, counts.get(crawl.id, 0))

    async def _get(self, kb_id: uuid.UUID, crawl_id: uuid.UUID, *, for_update: bool = False) -> Crawl:
        crawl = await self.repo.get(kb_id, crawl_id, for_update=for_update)
        if crawl is None:
            raise NotFound(CRAWL_NOT_FOUND)
        return crawl

    async def create(self, kb_id: uuid.UUID, data: CrawlCreate) -> CrawlRead:
        if not await self.kbs.lock(kb_id):
            raise NotFound("knowledge base not found")
        max_pages = data.max_pages if data.max_pages is not None else self.settings.max_pages_default
        if max_pages > self.settings.max_pages_limit:
            raise _invalid(
                "max_pages", f"at most {self.settings.max_pages_limit} pages (CRAWL__MAX_PAGES_LIMIT)"
            )
        interval = data.sync_interval_s or None
        try:
            await self.validate_url(data.url)
        except BlockedURL as exc:
            raise BadRequest(f"this URL cannot be fetched: {exc}") from exc
        start_url = normalise_url(data.url, intranet=self.intranet)
        if start_url is None:  # validate_url accepted it, so this cannot happen; say so plainly
            raise BadRequest("this URL cannot be fetched: it is not a valid http(s) URL")
        # The KB's row is locked above: two requests for one site are looked up in turn.
        existing = await self.repo.find_by_start_url(kb_id, start_url)
        if existing is not None:
            raise Conflict(f"this knowledge base already has a crawl from {start_url}: {existing.id}")
        crawl = Crawl(
            org_id=self.repo.org_id,
            kb_id=kb_id,
            start_url=start_url,
            max_depth=data.max_depth,
            max_pages=max_pages,
            include_patterns=list(data.include_patterns),
            exclude_patterns=list(data.exclude_patterns),
            use_sitemap=data.use_sitemap,
            sync_interval_s=interval,
        )
        self.repo.add(crawl)
        await self.session.commit()
        return to_read(crawl, 0)

    async def page(self, kb_id: uuid.UUID, *, limit: int, offset: int) -> Page[CrawlRead]:
        if not await self.kbs.exists(kb_id):
            raise NotFound("knowledge base not found")
        crawls, total = await self.repo.page(kb_id, limit=limit, offset=offset)
        counts = await self.repo.document_counts([c.id for c in crawls])
        return Page(
            items=[to_read(c, counts.get(c.id, 0)) for c in crawls], total=total, limit=limit, offset=offset
        )

    async def get(self, kb_id: uuid.UUID, crawl_id: uuid.UUID) -> CrawlRead:
        return await self._read(await self._get(kb_id, crawl_id))

    async def cancel(self, kb_id: uuid.UUID, crawl_id: uuid.UUID) -> CrawlRead:
        """A queued crawl is cancelled at once; a running one stops after its current page,
        keeping the pages it read."""
        crawl = await self._get(kb_id, crawl_id, for_update=True)
        if crawl.status == "queued":
            crawl.status, crawl.finished_at = "cancelled", utcnow()
        elif crawl.status == "running":
            crawl.cancel_requested = True
        else:
            raise Conflict(f"the crawl is not queued or running (it is {crawl.status})")
        crawl.updated_at = utcnow()
        await self.session.commit()
        return await self._read(crawl)

    async def run(self, kb_id: uuid.UUID, crawl_id: uuid.UUID) -> CrawlRead:
        """Queue a re-crawl now: unchanged pages cost a conditional request, nothing more."""
        crawl = await self._get(kb_id, crawl_id, for_update=True)
        if crawl.status in ACTIVE:
            raise Conflict(f"the crawl is already {crawl.status}")
        crawl.status, crawl.cancel_requested, crawl.attempts = "queued", False, 0
        crawl.lease_owner = crawl.lease_expires_at = None
        crawl.updated_at = utcnow()
        await self.session.commit()
        return await self._read(crawl)

    async def delete(self, kb_id: uuid.UUID, crawl_id: uuid.UUID) -> None:
        """The crawl and its pages; a run in progress loses its lease and writes nothing more."""
        await self._get(kb_id, crawl_id, for_update=True)
        await self.repo.delete(kb_id, crawl_id)
        await self.session.commit()
