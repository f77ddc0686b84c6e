"""The service in this process: an embedded PostgreSQL in a temporary folder, the real app,
and Litestar's test client in front of it."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from litestar.testing import AsyncTestClient
from litestar.testing.transport import TestClientTransport

from app.config import Settings
from app.db.engine import make_engine, make_sessionmaker
from app.db.migrate import upgrade
from app.evaluation.service_client import ServiceClient
from app.keys.service import create_organisation
from app.main import create_app

__all__ = ["embedded_postgres", "evaluation_settings", "in_process_service"]


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """A migrated PostgreSQL with pgvector in a fresh temporary folder, removed afterwards.

    Not ``app.db.embedded``: the service keeps its embedded server running after exit on
    purpose, while an evaluation's server must stop and vanish with its folder. Call this
    outside any running event loop: the migrations run their own.
    """
    import pgserver  # noqa: PLC0415  # only the in-process mode needs it

    folder = Path(tempfile.mkdtemp(prefix="vk-eval-"))
    server: Any = None
    try:
        server = pgserver.get_server(folder / "pg", cleanup_mode="delete")  # type: ignore[attr-defined]
        url: str = server.get_uri()
        upgrade(url)
        yield url
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def evaluation_settings(settings: Settings | None = None) -> Settings:
    """The service's settings (environment, .env) without the per-organisation rate limits
    and the cap on calls in progress.

    An evaluation sends thousands of calls a minute from one organisation, which the
    limits exist to stop; everything that shapes answers stays as configured.
    """
    settings = settings or Settings()
    limits = settings.limits.model_copy(
        update={"query_per_minute": 0, "manage_per_minute": 0, "query_in_flight": 0}
    )
    return settings.model_copy(update={"limits": limits})


@asynccontextmanager
async def in_process_service(url: str, settings: Settings) -> AsyncIterator[ServiceClient]:
    """A new organisation and the app with its ingestion workers, behind an admin-key client."""
    engine = make_engine(url, settings)
    try:
        async with make_sessionmaker(engine)() as session:
            _, key = await create_organisation(session, "Evaluation")
    finally:
        await engine.dispose()
    app = create_app(settings, database_url=url, run_workers=True)
    async with AsyncTestClient(app=app, timeout=60) as test_client:
        transport = _ThreadedTransport(TestClientTransport(test_client))
        async with httpx.AsyncClient(transport=transport, base_url=test_client.base_url, timeout=60) as http:
            yield ServiceClient(http, key)


class _ThreadedTransport(httpx.AsyncBaseTransport):
    """Litestar's test transport blocks its caller until the app, running in the test
    client's portal thread, has answered: through it, one request at a time is in flight
    however many tasks send. Sending from worker threads lets ``--concurrency`` requests
    overlap in the app's event loop, as they would over a socket."""

    def __init__(self, inner: TestClientTransport[Any]) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()  # the body must be in memory before another thread reads it
        return await asyncio.to_thread(self.inner.handle_request, request)
