"""The vector index for the dimension in use, and what the server's pgvector can do."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
from app.query import repository as sql
from app.query.retrieval import parse_version

log = logging.getLogger(__name__)
# The engine's connections give up on a statement the server has not ended in time (a server
# that hangs); a concurrent index build may rightly take minutes (76 s for 100,000 chunks of
# 512 dimensions), so it waits as long as the server lets it: without a statement timeout.
UNBOUNDED_S = 7 * 86_400.0


async def pgvector_version(engine: AsyncEngine) -> tuple[int, ...]:
    async with raw_connection(engine) as conn:
        return parse_version(await conn.fetchval(sql.PGVECTOR_VERSION_SQL))


async def build_vector_index(engine: AsyncEngine, dimensions: int, *, min_chunks: int = 0) -> str:
    """Make sure the HNSW expression index for ``dimensions`` exists and is valid.

    Run in the background at start-up: over 100,000 chunks the build takes minutes (76 s at
    512 dimensions with 2 parallel workers, longer with one), which must neither delay
    start-up nor stop ingestion, hence CONCURRENTLY and no statement timeout. Until it is
    valid, queries of large agents still answer correctly: the HNSW statement without its
    index is an exact scan. An advisory lock lets one replica build while the others carry
    on. Returns what was done.

    Only agents reading more than ``min_chunks`` chunks (QUERY__EXACT_SEARCH_MAX_CHUNKS) use
    it, and keeping it costs every chunk insert an HNSW insert (measured: about 8 ms of
    PostgreSQL CPU per 1,536-dimension vector, most of ingestion's database time), so it is
    not built while all knowledge bases together hold fewer chunks than that.
    """
    name = f"ix_chunks_hnsw_{int(dimensions)}"
    async with raw_connection(engine) as conn:
        if not await conn.fetchval("SELECT pg_try_advisory_lock(hashtext($1))", name):
            return "busy"
        try:
            valid = await conn.fetchval(
                "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass($1)", name
            )
            if valid:
                return "present"
            await conn.execute("SET statement_timeout = 0")
            if valid is False:
                # Left invalid by an interrupted concurrent build: it is not used, only maintained.
                await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}", timeout=UNBOUNDED_S)
            if min_chunks > 0:
                total = await conn.fetchval("SELECT coalesce(sum(chunk_count), 0) FROM knowledge_bases")
                if total <= min_chunks:
                    return "not needed"
            # One process: parallel build workers would take every core from the queries.
            await conn.execute("SET max_parallel_maintenance_workers = 0")
            log.info("building the HNSW index for %d-dimensional embeddings", dimensions)
            await conn.execute(sql.HNSW_INDEX_SQL.format(dim=int(dimensions)), timeout=UNBOUNDED_S)
            log.info("HNSW index for %d-dimensional embeddings ready", dimensions)
            return "built"
        finally:
            await conn.execute("RESET statement_timeout")
            await conn.execute("RESET max_parallel_maintenance_workers")
            await conn.execute("SELECT pg_advisory_unlock(hashtext($1))", name)


async def maintain_vector_index(
    engine: AsyncEngine, dimensions: int, *, min_chunks: int, interval_s: float = 300.0
) -> None:
    """Background task of each server process: build the index once it is needed (checked
    every ``interval_s``), then stop."""
    while True:
        try:
            if await build_vector_index(engine, dimensions, min_chunks=min_chunks) in ("present", "built"):
                return
        except asyncio.CancelledError:
            raise
        except Exception:
            # Queries stay correct without it (exact scans); try again at the next check.
            log.exception("could not build the HNSW index for %d dimensions", dimensions)
        await asyncio.sleep(interval_s)
