"""Ingestion workers: inside the service process (embedded default) or standalone
(``vk worker``), any number of them against one PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
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
        await self._listen()
        self._tasks = [
            asyncio.create_task(self._loop(i), name=f"ingest-{i}") for i in range(self.concurrency)
        ]
        self._maintenance = asyncio.create_task(self._maintain(), name="ingest-maintenance")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop taking work, let running documents finish within ``grace_s``, then release
        the leases of anything unfinished so another worker takes it at once."""
        self._stopping = True
        self._wake.set()
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close(timeout=5)
        if self._maintenance is not None:
            # Housekeeping has nothing to finish; waiting for its sleep to end held every
            # shutdown for the whole grace period.
            self._maintenance.cancel()
            await asyncio.gather(self._maintenance, return_exceptions=True)
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        try:
            async with raw_connection(self.ingestor.engine) as conn:
                released = await conn.execute(RELEASE_SQL, self.ingestor.owner)
            if not released.endswith(" 0"):
                log.info("released leases on shutdown: %s", released)
        except Exception:  # noqa: BLE001 - leases expire on their own if the database is gone
            log.warning("could not release leases on shutdown; they will expire")

    async def _listen(self) -> None:
        # Its own connection, outside the pool: a listening connection is held for the
        # pool's whole life and must not be reset or handed to anyone else.
        url = self.ingestor.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            self._listener = await asyncpg.connect(
                url, timeout=10, server_settings={"application_name": LISTENER_NAME}
            )
            await self._listener.add_listener(INGESTION_CHANNEL, self._notified)
        except Exception:  # noqa: BLE001 - polling still finds the work
            log.warning("cannot listen for queued documents; polling every %.1f s", self.poll_interval_s)
            self._listener = None

    def _notified(self, *args: Any) -> None:
        self._wake.set()

    async def _loop(self, index: int) -> None:
        while not self._stopping:
            try:
                claimed = await self.ingestor.claim(1)
            except Exception:
                log.warning("worker %d could not claim work; retrying", index, exc_info=True)
                await asyncio.sleep(self.poll_interval_s)
                continue
            if not claimed:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self.poll_interval_s)
                continue
            for doc in claimed:
                outcome = await self.ingestor.process(doc)
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
