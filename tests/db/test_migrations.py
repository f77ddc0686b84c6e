"""The migrations go from empty to head and back, on a database of their own."""

import asyncio
import random

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
    "crawls",
    "webhook_endpoints",
    "webhook_events",
    "webhook_deliveries",
    "console_sessions",
    "alembic_version",
}


@pytest.fixture
def scratch_url(pg_server):
    # A new empty database for each test, so none depends on another's leftovers or order.
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
    """Exact search reads every embedding of a KB: they must not sit in TOAST (0003); since
    BM25 reads chunk_terms, the tsvector and the text move out of the row (0005)."""
    upgrade(scratch_url)
    assert asyncio.run(_storage(scratch_url)) == {"embedding": "m", "tsv": "x", "text": "x"}
    downgrade(scratch_url, "0004")
    assert asyncio.run(_storage(scratch_url)) == {"embedding": "m", "tsv": "m", "text": "x"}
    downgrade(scratch_url, "0002")
    assert asyncio.run(_storage(scratch_url)) == {"embedding": "e", "tsv": "x", "text": "x"}
    upgrade(scratch_url)


async def _rows_per_page(url: str, dims: int) -> dict[str, float]:
    """Twelve chunk-shaped rows with ~1.4 KB of text each in a table with the chunks table's
    storage settings: how many share a heap page, and how many values went to TOAST."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TEMP TABLE probe (LIKE chunks INCLUDING STORAGE INCLUDING DEFAULTS)")
        text = " ".join(f"word{i} appointment{i % 37} insurance{i % 11}" for i in range(45))
        rng = random.Random(7)  # random floats: pglz cannot shrink them, as with real embeddings
        for n in range(12):
            vector = "[" + ",".join(f"{rng.uniform(-1, 1):.6f}" for _ in range(dims)) + "]"
            await conn.execute(
                "INSERT INTO probe (id, org_id, kb_id, document_id, ordinal, text, token_count, "
                "embedding_model, embedding_dim, embedding, tsv) "
                "VALUES ($1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 0, $2, 300, 'm', $3, "
                "$4::text::vector, to_tsvector('english', $2))",
                n,
                text,
                dims,
                vector,
            )
        pages = await conn.fetchval("SELECT count(DISTINCT (ctid::text::point)[0]) FROM probe")
        toast = await conn.fetchval(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'probe'"
        )
        toasted = await conn.fetchval(f"SELECT count(DISTINCT chunk_id) FROM {toast}")
    finally:
        await conn.close()
    return {"rows_per_page": 12 / pages, "toasted_per_row": toasted / 12}


def test_512_dimension_chunk_rows_hold_only_their_embedding(scratch_url):
    upgrade(scratch_url)
    # The tsvector and the text are in TOAST, the embedding in the row: three rows a page.
    assert asyncio.run(_rows_per_page(scratch_url, 512)) == {"rows_per_page": 3.0, "toasted_per_row": 2.0}
    downgrade(scratch_url, "0004")
    # With the tsvector inline (0003, 0004): only the text moves out, two rows a page.
    assert asyncio.run(_rows_per_page(scratch_url, 512)) == {"rows_per_page": 2.0, "toasted_per_row": 1.0}
    upgrade(scratch_url)


async def _exec(url: str, *statements: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        for statement in statements[:-1]:
            await conn.execute(statement)
        return await conn.fetch(statements[-1])
    finally:
        await conn.close()


def test_0006_registers_every_assigned_agent(scratch_url):
    upgrade(scratch_url, "0005")
    org, kb = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"
    agent, tuned = "00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000a2"
    asyncio.run(
        _exec(
            scratch_url,
            f"INSERT INTO organisations (id, name) VALUES ('{org}', 'Acme')",
            f"INSERT INTO knowledge_bases (id, org_id, title) VALUES ('{kb}', '{org}', 'FAQ')",
            f"INSERT INTO agent_assignments (kb_id, agent_id, org_id) VALUES ('{kb}', '{agent}', '{org}'),"
            f" ('{kb}', '{tuned}', '{org}')",
            f"INSERT INTO agents (org_id, agent_id, prompt_variant) VALUES ('{org}', '{tuned}', 'concise')",
            "SELECT 1",
        )
    )
    upgrade(scratch_url)
    rows = asyncio.run(
        _exec(scratch_url, "SELECT agent_id::text, prompt_variant FROM agents ORDER BY agent_id")
    )
    # The new agent is registered; the one with a setting keeps it.
    assert [(r["agent_id"], r["prompt_variant"]) for r in rows] == [(agent, None), (tuned, "concise")]


def test_0009_counts_chunks_and_bumps_by_trigger(scratch_url):
    upgrade(scratch_url, "0008")
    org, doc = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-0000000000d1"
    off, right = "00000000-0000-0000-0000-00000000000b", "00000000-0000-0000-0000-00000000000c"
    chunk = (
        "INSERT INTO chunks (org_id, kb_id, document_id, ordinal, text, token_count, embedding_model,"
        f" embedding_dim, embedding, tsv) VALUES ('{org}', '{{kb}}', '{doc}', {{n}}, 'text', 1, 'm', 3,"
        " '[1,0,0]', to_tsvector('english', 'text'))"
    )
    state = "SELECT id::text, content_version, chunk_count FROM knowledge_bases ORDER BY id"
    asyncio.run(
        _exec(
            scratch_url,
            f"INSERT INTO organisations (id, name) VALUES ('{org}', 'Acme')",
            # A count a forgetful writer left wrong, and one that is right.
            f"INSERT INTO knowledge_bases (id, org_id, title, content_version, chunk_count)"
            f" VALUES ('{off}', '{org}', 'Off', 4, 5), ('{right}', '{org}', 'Right', 7, 0)",
            f"INSERT INTO documents (id, org_id, kb_id, title, source_kind) VALUES ('{doc}', '{org}', '{off}',"
            " 'Doc', 'text')",
            chunk.format(kb=off, n=0),
            chunk.format(kb=off, n=1),
            "SELECT 1",
        )
    )
    upgrade(scratch_url)
    rows = asyncio.run(_exec(scratch_url, state))
    assert [tuple(r) for r in rows] == [(off, 5, 2), (right, 7, 0)]
    rows = asyncio.run(_exec(scratch_url, chunk.format(kb=off, n=2), state))
    assert [tuple(r) for r in rows] == [(off, 6, 3), (right, 7, 0)]
    downgrade(scratch_url, "0008")
    # Without the triggers, a chunk written moves nothing.
    rows = asyncio.run(_exec(scratch_url, chunk.format(kb=off, n=3), state))
    assert [tuple(r) for r in rows] == [(off, 6, 3), (right, 7, 0)]
    upgrade(scratch_url)


def test_0022_composes_stored_source_paths(scratch_url):
    upgrade(scratch_url, "0021")
    org, kb = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"
    decomposed, composed = "menu/cafe\u0301.md", "menu/caf\u00e9.md"
    document = (
        "INSERT INTO documents (id, org_id, kb_id, title, source_kind, source_path, created_at) VALUES"
        f" ('00000000-0000-0000-0000-0000000000d{{n}}', '{org}', '{kb}', 'Doc', 'text', '{{path}}',"
        " now() + interval '{n} seconds')"
    )
    asyncio.run(
        _exec(
            scratch_url,
            f"INSERT INTO organisations (id, name) VALUES ('{org}', 'Acme')",
            f"INSERT INTO knowledge_bases (id, org_id, title) VALUES ('{kb}', '{org}', 'FAQ')",
            document.format(n=1, path="notes/re\u0301sume\u0301.md"),
            # Two spellings of one path (two accents in either order): the older is composed.
            document.format(n=2, path="faq/a\u0323\u0307.md"),
            document.format(n=3, path="faq/a\u0307\u0323.md"),
            # The composed spelling is stored already: the decomposed one is left as it is.
            document.format(n=4, path=composed),
            document.format(n=5, path=decomposed),
            "SELECT 1",
        )
    )
    upgrade(scratch_url)
    rows = asyncio.run(_exec(scratch_url, "SELECT source_path FROM documents ORDER BY created_at"))
    assert [r["source_path"] for r in rows] == [
        "notes/r\u00e9sum\u00e9.md",
        "faq/\u1ea1\u0307.md",
        "faq/a\u0307\u0323.md",
        composed,
        decomposed,
    ]
