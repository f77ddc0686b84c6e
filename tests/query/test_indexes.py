"""The HNSW index is built in the background, concurrently, and rebuilt when left invalid."""

from sqlalchemy import text

from app.query.indexes import build_vector_index, pgvector_version

INDEX = "ix_chunks_hnsw_512"


async def _validity(engine) -> bool | None:
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:n)"), {"n": INDEX}
            )
        ).scalar()


async def test_builds_once_then_finds_it(engine):
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP INDEX IF EXISTS {INDEX}"))
    assert await _validity(engine) is None
    assert await build_vector_index(engine, 512) == "built"
    assert await _validity(engine) is True
    assert await build_vector_index(engine, 512) == "present"


async def test_an_invalid_index_is_dropped_and_rebuilt(engine):
    await build_vector_index(engine, 512)
    async with engine.begin() as conn:
        # What an interrupted CREATE INDEX CONCURRENTLY leaves behind.
        await conn.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(:n)"), {"n": INDEX}
        )
    assert await _validity(engine) is False
    assert await build_vector_index(engine, 512) == "built"
    assert await _validity(engine) is True


async def test_one_builder_at_a_time(engine):
    async with engine.connect() as conn:
        await conn.execute(text("SELECT pg_advisory_lock(hashtext(:n))"), {"n": INDEX})
        try:
            assert await build_vector_index(engine, 512) == "busy"
        finally:
            await conn.execute(text("SELECT pg_advisory_unlock(hashtext(:n))"), {"n": INDEX})


async def test_reads_the_servers_pgvector_version(engine):
    assert await pgvector_version(engine) >= (0, 5)


async def test_not_built_while_no_agent_could_use_it(engine):
    """Agents up to min_chunks chunks search exactly; an index nobody reads would only slow
    every insert, so it waits until the knowledge bases hold more chunks than that."""
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP INDEX IF EXISTS {INDEX}"))
    assert await build_vector_index(engine, 512, min_chunks=20_000) == "not needed"
    assert await _validity(engine) is None
    async with engine.begin() as conn:
        org = (
            await conn.execute(
                text(
                    "INSERT INTO organisations (id, name, created_at) VALUES (gen_random_uuid(), 'a', now()) RETURNING id"
                )
            )
        ).scalar()
        await conn.execute(
            text(
                "INSERT INTO knowledge_bases (id, org_id, title, description, language, content_version,"
                " chunk_count, created_at, updated_at) VALUES (gen_random_uuid(), :o, 'big', '', 'english', 1,"
                " 20001, now(), now())"
            ),
            {"o": org},
        )
    assert await build_vector_index(engine, 512, min_chunks=20_000) == "built"
    assert await _validity(engine) is True


async def test_an_invalid_leftover_is_dropped_even_when_not_needed(engine):
    await build_vector_index(engine, 512)
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(:n)"), {"n": INDEX}
        )
    assert await build_vector_index(engine, 512, min_chunks=20_000) == "not needed"
    assert await _validity(engine) is None


async def test_a_build_that_waits_longer_than_a_statement_may_is_not_cut(database_url, settings):
    """A concurrent build waits for older transactions to end; the engine's connections give
    up on a statement 2 s past the server's cap, which cut every build of a large index (and
    left it invalid, rebuilt and cut again every five minutes)."""
    import asyncio

    import asyncpg

    from app.db.engine import make_engine

    quick = settings.model_copy(update={"db": settings.db.model_copy(update={"statement_timeout_ms": 200})})
    engine = make_engine(database_url, quick)  # statements capped at 0.2 s, the client's wait at 2.2 s
    holder = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP INDEX IF EXISTS {INDEX}"))
        # An open transaction with a snapshot: CREATE INDEX CONCURRENTLY waits for it.
        await holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        await holder.fetchval("SELECT count(*) FROM chunks")
        build = asyncio.ensure_future(build_vector_index(engine, 512))
        await asyncio.sleep(3.0)  # past the client's 2.2 s
        assert not build.done()
        await holder.execute("COMMIT")
        assert await asyncio.wait_for(build, timeout=120) == "built"  # a guard, not a speed check
        assert await _validity(engine) is True
    finally:
        await holder.close()
        await engine.dispose()
