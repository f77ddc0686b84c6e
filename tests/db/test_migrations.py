"""The migrations go from empty to head and back, on a database of their own."""

import asyncio

import asyncpg
import pytest

from app.db.migrate import downgrade, upgrade

EXPECTED = {
    "rate_counters",
    "usage_daily",
    "agents",
    "organisations",
    "api_keys",
    "knowledge_bases",
    "documents",
    "agent_assignments",
    "chunks",
    "embedding_cache",
    "chunk_terms",
    "query_log",
    "answer_cache",
    "alembic_version",
}


@pytest.fixture(scope="module")
def scratch_url(pg_server):
    pg_server.psql("DROP DATABASE IF EXISTS vk_migrations; CREATE DATABASE vk_migrations;")
    return pg_server.get_uri(database="vk_migrations")


async def _tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        await conn.close()
    return {r["tablename"] for r in rows}


def test_upgrade_then_downgrade_then_upgrade(scratch_url):
    # Synchronous on purpose: Alembic's async env runs its own event loop.
    assert asyncio.run(_tables(scratch_url)) == set()
    upgrade(scratch_url)
    assert asyncio.run(_tables(scratch_url)) == EXPECTED
    downgrade(scratch_url, "base")
    assert asyncio.run(_tables(scratch_url)) == {"alembic_version"}
    upgrade(scratch_url)
    assert asyncio.run(_tables(scratch_url)) == EXPECTED


async def _storage(url: str) -> dict[str, str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT attname, attstorage FROM pg_attribute "
            "WHERE attrelid = 'chunks'::regclass AND attname IN ('embedding', 'tsv', 'text')"
        )
    finally:
        await conn.close()
    return {
        r["attname"]: r["attstorage"].decode() if isinstance(r["attstorage"], bytes) else r["attstorage"]
        for r in rows
    }


def test_chunk_search_columns_are_kept_inline(scratch_url):
    """Exact search reads every embedding of a KB: they must not sit in TOAST (0003)."""
    upgrade(scratch_url)
    assert asyncio.run(_storage(scratch_url)) == {"embedding": "m", "tsv": "m", "text": "x"}
    downgrade(scratch_url, "0002")
    assert asyncio.run(_storage(scratch_url)) == {"embedding": "e", "tsv": "x", "text": "x"}
    upgrade(scratch_url)
