"""The in-process worker pool (app.ingestion.worker): it stops without waiting for nothing."""

import asyncio

from app.embeddings.lexical import LexicalEmbedder
from app.ingestion.fetch import Fetcher
from app.ingestion.pipeline import Ingestor
from app.ingestion.worker import WorkerPool
from tests.conftest import fake_resolver


async def test_an_idle_pool_stops_at_once_not_after_its_grace(engine, settings):
    fetcher = Fetcher(resolver=fake_resolver, max_bytes=1_000_000, timeout_s=5.0)
    ingestor = Ingestor(engine, LexicalEmbedder(), fetcher, settings.ingestion, "test-pool")
    # Hour-long housekeeping sleeps and polls: neither may hold the shutdown.
    pool = WorkerPool(ingestor, concurrency=2, poll_interval_s=3600, maintenance_s=3600)
    await pool.start()
    try:
        await asyncio.sleep(0.1)  # the loops are asleep waiting for work
        # With a 120 s grace, only a stop that waits for nothing ends within the 60 s bound.
        await asyncio.wait_for(pool.stop(grace_s=120), timeout=60)
    finally:
        await fetcher.aclose()
    # Both loops ended on their own, neither cancelled nor failed: stop() lets running work
    # finish. The count matters: all() of an empty task list is true.
    assert len(pool._tasks) == 2
    assert [(task.done(), task.cancelled(), task.exception()) for task in pool._tasks] == [
        (True, False, None)
    ] * 2
    assert pool._maintenance is not None
    assert pool._maintenance.cancelled()
