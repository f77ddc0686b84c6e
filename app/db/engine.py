"""The one SQLAlchemy async engine (asyncpg driver) and how to reach its raw connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.config import Settings


def async_url(url: str) -> str:
    """Accept the usual ``postgresql://`` spellings and point SQLAlchemy at asyncpg."""
    for prefix in ("postgresql+asyncpg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    raise ValueError("DATABASE_URL must start with postgresql://")


COMMAND_GRACE_S = 2.0


def make_engine(url: str, settings: Settings) -> AsyncEngine:
    db = settings.db
    engine = create_async_engine(
        async_url(url),
        pool_size=db.pool_size,
        max_overflow=db.max_overflow,
        pool_timeout=db.pool_timeout_s,
        # No pre-ping: it costs a round trip on every checkout, three per query_knowledge call.
        # A connection whose server went away is closed by asyncpg as soon as the socket
        # reports it, and _discard_closed below drops it at checkout for free.
        pool_pre_ping=False,
        connect_args={
            "timeout": db.connect_timeout_s,
            # The client's own cap on a statement, a little past the server's: a server that
            # hangs (frozen, its disk stalled) cannot end a statement itself, and a request
            # waited on it for good. It then fails (TimeoutError: 503, "retry shortly").
            "command_timeout": db.statement_timeout_ms / 1000 + COMMAND_GRACE_S,
            # asyncpg prepares every statement, and PostgreSQL's default lets a statement
            # run five times on custom plans and then keep a generic plan when it costs no
            # more: planned once per connection instead of on every call (0.4 ms a call for
            # the agent's context and BM25; docs/BENCHMARKS.md, seventh session). FIELD-NOTES
            # warns of a KB-filtered vector search whose generic plan took the ANN index and
            # lost the filter (3.6 -> 234 ms). Ours cannot: the exact statement's expression
            # is not the HNSW index's (tests/query/test_retrieval.py checks its generic
            # plan), its generic plan is the KB b-tree costed for ten KBs, so custom plans
            # stay cheaper and are kept; the HNSW statement uses the index by design.
            "server_settings": {
                "plan_cache_mode": "auto",
                "statement_timeout": str(db.statement_timeout_ms),
                "application_name": "voice-knowledge",
            },
        },
    )
    event.listen(engine.sync_engine, "checkout", _discard_closed)
    return engine


def _discard_closed(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Pessimistic disconnect handling without a round trip: DisconnectionError makes the
    pool throw the connection away and connect a new one."""
    if dbapi_connection.driver_connection.is_closed():
        raise exc.DisconnectionError("connection closed by the server")


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


# How a statement ends when it is cut off mid-way (the call's deadline, the command
# timeout), or finds its connection still busy or closed.
_CUT_OFF = (asyncio.CancelledError, TimeoutError, asyncpg.InterfaceError)


@asynccontextmanager
async def raw_connection(engine: AsyncEngine) -> AsyncIterator[Any]:
    """A pooled connection's underlying asyncpg connection, for the hot path.

    The query path skips the ORM and SQLAlchemy's statement compilation on purpose:
    one hand-written statement over asyncpg costs a fraction of a millisecond.
    """
    async with engine.connect() as conn:
        driver = await driver_connection(conn)
        try:
            yield driver
        except _CUT_OFF as exc:
            if isinstance(exc, asyncpg.DataError):  # refused before sending: nothing in flight
                raise
            # A statement cancelled or timed out leaves asyncpg waiting for the server to
            # acknowledge the cancel; the pool's reset on return does nothing for a
            # connection SQLAlchemy started no transaction on, so the next request would
            # inherit the wait. Closed at once (terminate(): no I/O) and thrown away: a
            # graceful close, SQLAlchemy's first try, would wait up to 2 s on a server that
            # hangs, past the call's deadline.
            driver.terminate()
            await conn.invalidate()
            raise


async def driver_connection(conn: AsyncConnection) -> Any:
    raw = await conn.get_raw_connection()
    return raw.driver_connection
