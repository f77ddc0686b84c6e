"""Alembic environment: async, against DATABASE_URL or the embedded PostgreSQL.

Programmatic callers (the CLI, the start command, the tests) pass a ready URL through
``config.attributes["url"]``; ``alembic upgrade head`` on the command line resolves it
from the settings like the service does.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import get_settings
from app.db.embedded import resolve_database_url
from app.db.engine import async_url

config = context.config


def _url() -> str:
    url = config.attributes.get("url")
    if url:
        return str(url)
    settings = get_settings()
    return resolve_database_url(settings.database_url, settings.db.embedded_dir)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(async_url(_url()), poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=async_url(_url()), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
