"""What the loops that take leased work from PostgreSQL share (the ingestion workers, the
webhook dispatcher, the crawl loops): a listening connection that wakes them when work is
queued, the wait between polls, and a shutdown that lets the work under way finish within a
grace period and hands back the leases of whatever did not."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import raw_connection

log = logging.getLogger(__name__)


async def listen(
    engine: AsyncEngine, channel: str, application_name: str, wake: asyncio.Event, *, what: str, poll_s: float
) -> asyncpg.Connection | None:
    """A connection that sets ``wake`` on every notification on ``channel``; None when it
    cannot be made, as polling every ``poll_s`` still finds the work (``what``, in the log).

    Its own connection, outside the pool: a listening connection is held for the loops'
    whole life and must not be reset or handed to anyone else."""

    def notified(*_: Any) -> None:
        wake.set()

    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        listener = await asyncpg.connect(
            url, timeout=10, server_settings={"application_name": application_name}
        )
        await listener.add_listener(channel, notified)
    except Exception:  # noqa: BLE001 - polling still finds the work
        log.warning("cannot listen for %s; polling every %.1f s", what, poll_s)
        return None
    return listener


async def sleep_until_woken(wake: asyncio.Event, timeout_s: float) -> None:
    """Until ``wake`` is set again or ``timeout_s`` has passed, whichever comes first."""
    wake.clear()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), timeout=timeout_s)


async def stop_loops(
    loops: list[asyncio.Task[None]],
    *,
    grace_s: float,
    listener: asyncpg.Connection | None = None,
    housekeeping: asyncio.Task[None] | None = None,
) -> None:
    """Close the listener, cancel the housekeeping, let the loops finish the work they hold
    within ``grace_s`` and cancel those still busy. The caller has told the loops to stop
    taking work (and woken them) first."""
    if listener is not None:
        with contextlib.suppress(Exception):
            await listener.close(timeout=5)
    if housekeeping is not None:
        # Housekeeping has nothing to finish; waiting for its sleep to end held every
        # shutdown for the whole grace period.
        housekeeping.cancel()
        await asyncio.gather(housekeeping, return_exceptions=True)
    if loops:
        _, pending = await asyncio.wait(loops, timeout=grace_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


async def release_leases(engine: AsyncEngine, sql: str, owner: str, *, what: str) -> None:
    """Put back what ``owner``'s loops still hold after ``stop_loops`` (``sql`` takes the
    owner), so another worker takes it at once rather than when the lease expires."""
    try:
        async with raw_connection(engine) as conn:
            released: str = await conn.execute(sql, owner)
    except Exception:  # noqa: BLE001 - leases expire on their own if the database is gone
        log.warning("could not release %s on shutdown; they will expire", what)
        return
    if not released.endswith(" 0"):
        log.info("released %s on shutdown: %s", what, released)
