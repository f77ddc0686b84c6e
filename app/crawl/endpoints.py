from __future__ import annotations

import uuid

from litestar import Controller, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_202_ACCEPTED
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.crawl.schemas import CrawlCreate, CrawlRead
from app.crawl.service import CrawlService
from app.errors import Conflict
from app.http import Limit, Offset
from app.schemas import Page


def provide_crawl_service(
    state: State, session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> CrawlService:
    return CrawlService(
        session,
        principal.org_id,
        validate_url=state.validate_url,
        intranet=state.settings.ingestion.intranet,
        settings=state.settings.crawl,
    )


class CrawlController(Controller):
    path = "/api/knowledge/{kb_id:str}/crawls"
    tags = ["crawls"]
    guards = [admin_only]
    dependencies = {"crawl_service": Provide(provide_crawl_service, sync_to_thread=False)}

    @post(
        "/",
        status_code=HTTP_202_ACCEPTED,
        summary="Crawl a site into the knowledge base",
        description=(
            "Answers 202 with the crawl `queued`; the worker reads robots.txt and the sitemap, "
            "follows same-site links, and keeps each HTML page as a document (docs/CRAWL.md). "
            "A private or otherwise refused host is a 400 with the reason; a second crawl from "
            "the same start URL is a 409."
        ),
    )
    async def create_crawl(
        self,
        kb_id: FromPath[uuid.UUID],
        data: JSONBody[CrawlCreate],
        crawl_service: NamedDependency[CrawlService],
    ) -> CrawlRead:
        return await crawl_service.create(kb_id, data)

    @get("/", summary="The knowledge base's crawls, oldest first (paginated)")
    async def list_crawls(
        self,
        kb_id: FromPath[uuid.UUID],
        crawl_service: NamedDependency[CrawlService],
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[CrawlRead]:
        return await crawl_service.page(kb_id, limit=limit, offset=offset)

    @get("/{crawl_id:str}", summary="One crawl: status, progress counts, problems")
    async def get_crawl(
        self,
        kb_id: FromPath[uuid.UUID],
        crawl_id: FromPath[uuid.UUID],
        crawl_service: NamedDependency[CrawlService],
    ) -> CrawlRead:
        return await crawl_service.get(kb_id, crawl_id)

    @post(
        "/{crawl_id:str}/cancel",
        status_code=HTTP_202_ACCEPTED,
        summary="Cancel a queued or running crawl (pages already read are kept)",
        opt={"errors": (Conflict,)},
    )
    async def cancel_crawl(
        self,
        kb_id: FromPath[uuid.UUID],
        crawl_id: FromPath[uuid.UUID],
        crawl_service: NamedDependency[CrawlService],
    ) -> CrawlRead:
        return await crawl_service.cancel(kb_id, crawl_id)

    @post(
        "/{crawl_id:str}/run",
        status_code=HTTP_202_ACCEPTED,
        summary="Re-crawl now (unchanged pages are not re-indexed)",
        opt={"errors": (Conflict,)},
    )
    async def run_crawl(
        self,
        kb_id: FromPath[uuid.UUID],
        crawl_id: FromPath[uuid.UUID],
        crawl_service: NamedDependency[CrawlService],
    ) -> CrawlRead:
        return await crawl_service.run(kb_id, crawl_id)

    @delete("/{crawl_id:str}", summary="Delete a crawl and the documents of its pages")
    async def delete_crawl(
        self,
        kb_id: FromPath[uuid.UUID],
        crawl_id: FromPath[uuid.UUID],
        crawl_service: NamedDependency[CrawlService],
    ) -> None:
        await crawl_service.delete(kb_id, crawl_id)
