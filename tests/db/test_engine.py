"""The pooled raw connections of the hot path: a statement cut off mid-way (the call's
deadline, the caller gone) must not leave its connection busy for the next request."""

from __future__ import annotations

import asyncio
import os
import signal

import asyncpg
import pytest

from app.config import Settings
from app.db.engine import make_engine, raw_connection


async def test_a_connection_cut_off_mid_statement_is_not_handed_to_the_next_request(
    database_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A graceful close waits for a server that may hang (up to 2 s, past the call's deadline).
    closed_gracefully: list[int] = []
    close = asyncpg.Connection.close

    async def recorded_close(self: asyncpg.Connection, *, timeout: float | None = None) -> None:
        if not self.is_closed():
            closed_gracefully.append(self.get_server_pid())
        await close(self, timeout=timeout)

    monkeypatch.setattr(asyncpg.Connection, "close", recorded_close)
    # One connection in the pool, so the next checkout would get the same one back.
    one = settings.model_copy(
        update={"db": settings.db.model_copy(update={"pool_size": 1, "max_overflow": 0})}
    )
    engine = make_engine(database_url, one)
    stopped: int | None = None
    try:
        async with raw_connection(engine) as conn:
            stopped = await conn.fetchval("SELECT pg_backend_pid()")
        # The backend stops answering, so neither the statement nor asyncpg's cancel request
        # can finish: the connection stays mid-operation, as with a server that hangs.
        os.kill(stopped, signal.SIGSTOP)

        async def cut_off() -> None:
            async with raw_connection(engine) as conn:
                await conn.fetchval("SELECT 1")

        with pytest.raises(TimeoutError):
            await asyncio.wait_for(cut_off(), timeout=0.2)
        assert closed_gracefully == []

        async with raw_connection(engine) as conn:
            assert (await conn.fetchval("SELECT pg_backend_pid()")) != stopped
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        await engine.dispose()
