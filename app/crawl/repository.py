"""SQL for crawls.

``CrawlRepository`` serves the API: every query is scoped to the organisation and the KB in
``_scoped``. The statements below it run the crawl queue on raw asyncpg connections in the
worker, as app/ingestion/repository.py does for documents: a runner takes a crawl with a
lease (``FOR UPDATE SKIP LOCKED``), renews it with each progress write, and every write of
a run is fenced by that lease.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import column, delete, func, select, table
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select

from app.crawl.models import Crawl

CRAWL = Crawl.__table__  # type: ignore[attr-defined]
# The documents columns this module reads; crawl_id is known to the crawl feature only.
DOC = table("documents", column("org_id"), column("crawl_id"))


class CrawlRepository:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.org_id = org_id

    def _scoped(self, stmt: Select[Any], kb_id: uuid.UUID) -> Select[Any]:
        return stmt.where(CRAWL.c.org_id == self.org_id, CRAWL.c.kb_id == kb_id)

    async def get(self, kb_id: uuid.UUID, crawl_id: uuid.UUID, *, for_update: bool = False) -> Crawl | None:
        stmt = self._scoped(select(Crawl), kb_id).where(CRAWL.c.id == crawl_id)
        if for_update:
            stmt = stmt.with_for_update()
        result: Crawl | None = await self.session.scalar(stmt)
        return result

    async def page(self, kb_id: uuid.UUID, *, limit: int, offset: int) -> tuple[list[Crawl], int]:
        rows = await self.session.scalars(
            self._scoped(select(Crawl), kb_id)
            .order_by(CRAWL.c.created_at, CRAWL.c.id)
            .limit(limit)
            .offset(offset)
        )
        total = await self.session.scalar(self._scoped(select(func.count()).select_from(CRAWL), kb_id))
        return list(rows), int(total or 0)

    async def find_by_start_url(self, kb_id: uuid.UUID, start_url: str) -> Crawl | None:
        result: Crawl | None = await self.session.scalar(
            self._scoped(select(Crawl), kb_id).where(CRAWL.c.start_url == start_url).limit(1)
        )
        return result

    async def document_counts(self, crawl_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
        rows = await self.session.execute(
            select(DOC.c.crawl_id, func.count())
            .where(DOC.c.org_id == self.org_id, DOC.c.crawl_id.in_(crawl_ids))
            .group_by(DOC.c.crawl_id)
        )
        return {row[0]: int(row[1]) for row in rows}

    def add(self, crawl: Crawl) -> None:
        crawl.org_id = self.org_id
        self.session.add(crawl)

    async def delete(self, kb_id: uuid.UUID, crawl_id: uuid.UUID) -> None:
        # Its pages go with it (ON DELETE CASCADE), their chunks with them.
        await self.session.execute(
            delete(Crawl).where(CRAWL.c.org_id == self.org_id, CRAWL.c.kb_id == kb_id, CRAWL.c.id == crawl_id)
        )


# --- the crawl queue (worker side) ---------------------------------------------------------

CLAIM_SQL = """
WITH picked AS (
    SELECT id FROM crawls
    WHERE (status = 'queued' AND (lease_expires_at IS NULL OR lease_expires_at < now()))
       OR (status = 'running' AND lease_expires_at < now() AND attempts < $3)
    ORDER BY created_at
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
UPDATE crawls c
SET status = 'running', attempts = c.attempts + 1, lease_owner = $1,
    lease_expires_at = now() + make_interval(secs => $2), started_at = now(), finished_at = NULL,
    error = NULL, problems = '[]', pages_found = 0, pages_read = 0, pages_unchanged = 0,
    pages_failed = 0, pages_skipped = 0, pages_retired = 0, updated_at = now()
FROM picked
WHERE c.id = picked.id
RETURNING c.id, c.lease_owner AS lease, c.org_id, c.kb_id, c.start_url, c.max_depth, c.max_pages,
          c.include_patterns, c.exclude_patterns, c.use_sitemap, c.cancel_requested
"""

# A crawl whose worker died more often than allowed is not retried forever.
GIVE_UP_SQL = """
UPDATE crawls
SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL, updated_at = now(), finished_at = now(),
    error = 'the crawl was interrupted ' || attempts || ' times; giving up (run it again to retry)',
    next_run_at = CASE WHEN sync_interval_s > 0 THEN now() + make_interval(secs => sync_interval_s) END
WHERE status = 'running' AND lease_expires_at < now() AND attempts >= $1
"""

# Scheduled re-crawls whose time has come go back in the queue.
DUE_SQL = """
UPDATE crawls
SET status = 'queued', attempts = 0, cancel_requested = false, lease_expires_at = NULL, updated_at = now()
WHERE next_run_at <= now() AND status IN ('completed', 'failed', 'cancelled')
"""

# Counts so far; renews the lease. No row back: the lease is lost (or the crawl deleted).
PROGRESS_SQL = """
UPDATE crawls
SET pages_found = $3, pages_read = $4, pages_unchanged = $5, pages_failed = $6, pages_skipped = $7,
    problems = $8::jsonb, lease_expires_at = now() + make_interval(secs => $9), updated_at = now()
WHERE id = $1 AND lease_owner = $2
RETURNING cancel_requested
"""

FINISH_SQL = """
UPDATE crawls
SET status = $3, error = $4, pages_retired = $5, lease_owner = NULL, lease_expires_at = NULL,
    cancel_requested = false, finished_at = now(), updated_at = now(),
    next_run_at = CASE WHEN sync_interval_s > 0 THEN now() + make_interval(secs => sync_interval_s) END
WHERE id = $1 AND lease_owner = $2
RETURNING id, org_id, kb_id, start_url, status, error, pages_found, pages_read, pages_unchanged,
          pages_failed, pages_skipped, pages_retired, started_at, finished_at
"""

LOCK_LEASED_SQL = "SELECT 1 FROM crawls WHERE id = $1 AND lease_owner = $2 FOR UPDATE"

# What earlier runs kept: the page state a conditional re-fetch needs.
PAGES_SQL = """
SELECT id, source_url, etag, last_modified, content_hash FROM documents WHERE crawl_id = $1
"""

ORIGINAL_SQL = "SELECT original FROM documents WHERE id = $1"

# Pages no longer on the site (gone, or not reached by this run) are deleted with their chunks.
RETIRE_SQL = """
DELETE FROM documents WHERE crawl_id = $1 AND NOT (source_url = ANY($2::text[]))
"""

# The same organisation and KB locks, in the same order, as an upload (app/documents/service.py).
LOCK_ORG_SQL = "SELECT 1 FROM organisations WHERE id = $1 FOR NO KEY UPDATE"
LOCK_KB_SQL = "SELECT 1 FROM knowledge_bases WHERE id = $1 FOR NO KEY UPDATE"
STORED_BYTES_SQL = "SELECT coalesce(sum(size_bytes), 0) FROM documents WHERE org_id = $1 AND id <> $2"
KB_DOCUMENTS_SQL = "SELECT count(*) FROM documents WHERE kb_id = $1"

INSERT_PAGE_SQL = """
INSERT INTO documents (id, org_id, kb_id, crawl_id, title, source_kind, source_url, original,
                       content_hash, size_bytes, etag, last_modified, status, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 'html', $6, $7::bytea, $8, octet_length($7::bytea), $9, $10, 'pending',
        now(), now())
"""

# New content for a page: queued again at once, as an edit is (app/documents/service.py _requeue).
# The old chunks keep answering until the worker swaps the new ones in.
UPDATE_PAGE_SQL = """
UPDATE documents
SET original = $2::bytea, content_hash = $3, size_bytes = octet_length($2::bytea), title = $4, etag = $5,
    last_modified = $6, status = 'pending', reread = false, error = NULL, attempts = 0, lease_owner = NULL,
    lease_expires_at = NULL, progress_done = 0, progress_total = 0, updated_at = now()
WHERE id = $1
"""

# Unchanged content: only the validators the next conditional request sends.
TOUCH_PAGE_SQL = """
UPDATE documents SET etag = $2, last_modified = $3
WHERE id = $1 AND (etag IS DISTINCT FROM $2 OR last_modified IS DISTINCT FROM $3)
"""
