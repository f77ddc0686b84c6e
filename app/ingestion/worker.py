"""Ingestion workers: inside the service process (embedded default) or standalone
(``vk worker``), any number of them against one PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
from app.db.leasing import listen, release_leases, sleep_until_woken, stop_loops
from app.ingestion.pipeline import Ingestor

log = logging.getLogger(__name__)

# Notified by a trigger whenever a document becomes pending (migration 0007).
INGESTION_CHANNEL = "vk_ingest"
LISTENER_NAME = "voice-knowledge-ingest-listener"

RELEASE_SQL = """
UPDATE documents
SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0)
WHERE starts_with(lease_owner, $1 || '/') AND status = 'processing'
"""


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class WorkerPool:
    """``concurrency`` loops that each take one document at a time.

    They wake when any process queues a document (a notification on ``INGESTION_CHANNEL``,
    or ``wake`` from this process) and otherwise poll every ``poll_interval_s``, which also
    covers a lost notification connection and leases that expire.
    """

    def __init__(
        self, ingestor: Ingestor, *, concurrency: int, poll_interval_s: float, maintenance_s: float = 30.0
    ) -> None:
        self.ingestor = ingestor
        self.concurrency = concurrency
        self.poll_interval_s = poll_interval_s
        self.maintenance_s = maintenance_s
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._maintenance: asyncio.Task[None] | None = None
        self._listener: asyncpg.Connection | None = None
        self.processed: dict[str, int] = {}

    def wake(self) -> None:
        self._wake.set()

    async def start(self) -> None:
        await self.ingestor.maintenance(self.ingestor.embedder.model_key)
        self._listener = await listen(
            self.ingestor.engine,
            INGESTION_CHANNEL,
            LISTENER_NAME,
            self._wake,
            what="queued documents",
            poll_s=self.poll_interval_s,
        )
        self._tasks = [
            asyncio.create_task(self._loop(i), name=f"ingest-{i}") for i in range(self.concurrency)
        ]
        self._maintenance = asyncio.create_task(self._maintain(), name="ingest-maintenance")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop taking work, let running documents finish within ``grace_s``, then release
        the leases of anything unfinished so another worker takes it at once."""
        self._stopping = True
        self._wake.set()
        await stop_loops(
            self._tasks, grace_s=grace_s, listener=self._listener, housekeeping=self._maintenance
        )
        await release_leases(self.ingestor.engine, RELEASE_SQL, self.ingestor.owner, what="leases")

    async def _loop(self, index: int) -> None:
        while not self._stopping:
            try:
                claimed = await self.ingestor.claim(1)
            except Exception:
                log.warning("worker %d could not claim work; retrying", index, exc_info=True)
                await asyncio.sleep(self.poll_interval_s)
                continue
            if not claimed:
                await sleep_until_woken(self._wake, self.poll_interval_s)
                continue
            for doc in claimed:
                try:
                    outcome = await self.ingestor.process(doc)
                except Exception:
                    # The document's outcome could not be written (the database went away
                    # mid-document): its lease runs out and it is taken again. The loop
                    # lives on; were it to end, nothing would be ingested until a restart.
                    log.warning("worker %d could not finish document %s; it will be retried", index,
                                doc.id, exc_info=True)  # fmt: skip
                    await asyncio.sleep(self.poll_interval_s)
                    continue
                self.processed[outcome.status] = self.processed.get(outcome.status, 0) + 1
            # Another document may be waiting for a worker that just went to sleep.
            self._wake.set()

    async def _maintain(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.maintenance_s)
            try:
                await self.ingestor.maintenance()
            except Exception:
                log.warning("ingestion maintenance failed; retrying later", exc_info=True)


async def drain(ingestor: Ingestor, *, max_documents: int = 10_000) -> dict[str, int]:
    """Process queued documents until none is ready to run (tests, CLI ``--once``)."""
    counts: dict[str, int] = {}
    for _ in range(max_documents):
        claimed = await ingestor.claim(1)
        if not claimed:
            break
        outcome = await ingestor.process(claimed[0])
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    return counts


async def wait_engine(engine: AsyncEngine) -> None:
    async with raw_connection(engine) as conn:
        await conn.fetchval("SELECT 1")
