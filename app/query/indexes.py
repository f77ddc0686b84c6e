"""The vector index for the dimension in use, and what the server's pgvector can do."""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection
from app.query import repository as sql
from app.query.retrieval import parse_version

log = logging.getLogger(__name__)


async def prepare_vector_search(engine: AsyncEngine, dimensions: int) -> tuple[int, ...]:
    """Make sure the HNSW expression index for ``dimensions`` exists; return pgvector's version.

    ``IF NOT EXISTS`` makes this a catalogue lookup on every start but the first for a
    given dimension (changing the embedding model's size builds a new index once).
    """
    async with raw_connection(engine) as conn:
        version = parse_version(await conn.fetchval(sql.PGVECTOR_VERSION_SQL))
        exists = await conn.fetchval(
            "SELECT to_regclass($1) IS NOT NULL", f"ix_chunks_hnsw_{int(dimensions)}"
        )
        if not exists:
            log.info("building the HNSW index for %d-dimensional embeddings", dimensions)
            await conn.execute(sql.HNSW_INDEX_SQL.format(dim=int(dimensions)))
    return version
