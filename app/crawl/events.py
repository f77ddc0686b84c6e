"""The point where a crawl run ends, for whatever should follow it.

``crawl_finished`` runs inside the transaction that records the run's final status, on the
worker's connection: what it writes commits (or rolls back) with that status, and it is
called once per run, whichever way the run ended (completed, failed or cancelled).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg


@dataclass(frozen=True, slots=True)
class FinishedCrawl:
    id: uuid.UUID
    org_id: uuid.UUID
    kb_id: uuid.UUID
    start_url: str
    status: str  # completed | failed | cancelled
    error: str | None
    pages_found: int
    pages_read: int
    pages_unchanged: int
    pages_failed: int
    pages_skipped: int
    pages_retired: int
    started_at: datetime | None
    finished_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> FinishedCrawl:
        return cls(**{name: row[name] for name in cls.__slots__})


async def crawl_finished(conn: asyncpg.Connection, crawl: FinishedCrawl) -> None:
    """A crawl run has ended; its pages are queued for indexing (not necessarily indexed yet).

    Subscribed webhook endpoints get a ``crawl.completed`` event, written to the outbox in
    this transaction (migration 0014), so the event exists exactly when the status does.
    """
    data = {
        "crawl_id": str(crawl.id),
        "kb_id": str(crawl.kb_id),
        "start_url": crawl.start_url,
        "status": crawl.status,
        "error": crawl.error,
        "pages_found": crawl.pages_found,
        "pages_read": crawl.pages_read,
        "pages_unchanged": crawl.pages_unchanged,
        "pages_failed": crawl.pages_failed,
        "pages_skipped": crawl.pages_skipped,
        "pages_retired": crawl.pages_retired,
        "started_at": crawl.started_at.isoformat() if crawl.started_at else None,
        "finished_at": crawl.finished_at.isoformat(),
    }
    await conn.execute(
        "SELECT enqueue_webhook_event($1, 'crawl.completed', $2::jsonb)", crawl.org_id, json.dumps(data)
    )
