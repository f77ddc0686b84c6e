"""Test set-up: one real PostgreSQL with pgvector (pgserver) per test session, migrated by
the project's own Alembic migrations; every test starts from empty tables.

Tables are truncated rather than wrapped in a rolled-back transaction because the code
under test commits for real: ingestion workers take leases from separate connections and
the hot path uses raw asyncpg connections from the pool, exactly as in production.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import respx
from litestar import Litestar
from litestar.testing import AsyncTestClient
from respx.mocks import HTTPXMocker
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

REPO = Path(__file__).resolve().parents[1]
# The real evaluation data (squad-dev, callers-dev, html-dev, the PDFs) lives beside the
# clone, not in it. Tests that read it carry ``@pytest.mark.shared_data("eval/...")``.
SHARED = REPO.parent / "shared"
ON_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
# Tests never read a developer's .env or real keys; and tiktoken reads the encodings the app
# ships (app/__init__.py points it there unless TIKTOKEN_CACHE_DIR is set), as in production.
for _name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DATABASE_URL", "TIKTOKEN_CACHE_DIR"):
    os.environ.pop(_name, None)

from app.config import Settings  # noqa: E402
from app.db.engine import make_engine, make_sessionmaker  # noqa: E402
from app.db.migrate import upgrade  # noqa: E402
from app.keys.service import create_organisation  # noqa: E402
from app.main import create_app  # noqa: E402

TABLES = (
    "console_sessions, webhook_deliveries, webhook_events, webhook_endpoints, "
    "rate_counters, usage_daily, agents, answer_cache, query_log, embedding_cache, chunks, documents, crawls, "
    "agent_assignments, "
    "knowledge_bases, api_keys, organisations"
)
PUBLIC_IP = "93.184.216.34"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "shared_data(path): reads ../shared/<path>, the real evaluation data beside the clone; "
        "skipped when it is absent, except under CI=true, where its absence fails the test",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: a skipped test should not start PostgreSQL.
    for marker in item.iter_markers("shared_data"):
        (relative,) = marker.args
        if (SHARED / relative).exists():
            continue
        reason = f"needs ../shared/{relative}: absent"
        if ON_CI:
            # CI has the data beside the clone; a skip there would hide a lost folder.
            pytest.fail(f"{reason} (CI=true: the real-data tests must run, not be skipped)", pytrace=False)
        pytest.skip(reason)


class _OpenAIClientMocker(HTTPXMocker):
    """respx for the provider's client, whose transport is aiohttp's (app/openai_client.py):
    respx's default mocker patches httpcore, which that client never reaches. This one takes
    its requests at httpx's level, for the same router as everything else."""

    name = "openai-client"
    targets = ["httpx_aiohttp.client.HttpxAiohttpClient"]


@contextmanager
def openai_client_mocked(router: respx.MockRouter) -> Iterator[respx.MockRouter]:
    """``router`` (started) also answers the provider client's requests."""
    _OpenAIClientMocker.register(router)
    _OpenAIClientMocker.start()
    try:
        yield router
    finally:
        _OpenAIClientMocker.unregister(router)
        _OpenAIClientMocker.stop()


@pytest.fixture
def respx_mock(request: pytest.FixtureRequest) -> Iterator[respx.MockRouter]:
    """respx's own fixture (configured by a ``respx`` marker as usual), which also mocks the
    provider's client."""
    marker = request.node.get_closest_marker("respx")
    router = respx.mock if marker is None else respx.mock(**marker.kwargs)
    with router, openai_client_mocked(router):
        yield router


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    import pgserver

    # pgserver logs at INFO from its exit hook, after pytest has closed the streams the
    # app's logging writes to: every run ended with "--- Logging error ---" tracebacks.
    logging.getLogger("pgserver").setLevel(logging.WARNING)

    with tempfile.TemporaryDirectory(prefix="vk-test-pg-") as data_dir:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        yield server
        server.cleanup()


@pytest.fixture(scope="session")
def database_url(pg_server: Any) -> str:
    pg_server.psql("CREATE DATABASE vk_test;")
    url = pg_server.get_uri(database="vk_test")
    upgrade(url)
    return str(url)


@pytest.fixture(scope="session")
def settings() -> Settings:
    # Most tests pin exact answers and rankings of the lexical embedder (fast, and its
    # behaviour is what they are about); the semantic default has its own tests, which ask
    # for ``semantic_settings`` (tests/query/test_dental_example.py, tests/query/test_semantic.py).
    return Settings(_env_file=None, embedding={"provider": "lexical"})  # type: ignore[call-arg]


@pytest.fixture(scope="session")
def semantic_settings() -> Settings:
    """The settings of a fresh install: no key, so the offline default embedder (minilm)."""
    return Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.fixture(scope="session")
async def engine(database_url: str, settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(database_url, settings)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
def sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return make_sessionmaker(engine)


@pytest.fixture(autouse=True)
def _engine_if_used(request: pytest.FixtureRequest) -> AsyncEngine | None:
    """The session's engine when the test uses the database. Set up here, in a plain fixture:
    from inside an async fixture the event loop is already running, and the engine's async
    set-up cannot start (a file whose first test asked for ``database_url`` alone failed)."""
    if "database_url" not in request.fixturenames and "engine" not in request.fixturenames:
        return None
    engine: AsyncEngine = request.getfixturevalue("engine")
    return engine


@pytest.fixture(autouse=True)
async def _clean_tables(_engine_if_used: AsyncEngine | None) -> None:
    if _engine_if_used is None:
        return
    async with _engine_if_used.begin() as conn:
        await conn.exec_driver_sql(f"TRUNCATE {TABLES} CASCADE")


async def fake_resolver(host: str, port: int) -> list[str]:
    """Every hostname in tests resolves to a public documentation-free address."""
    return [PUBLIC_IP]


@pytest.fixture
def app(database_url: str, settings: Settings) -> Litestar:
    # Workers are driven explicitly in tests (``drain``) so every outcome is deterministic.
    return create_app(settings, database_url=database_url, resolver=fake_resolver, run_workers=False)


def make_ingestor(app: Litestar, engine: AsyncEngine, owner: str = "test-worker") -> Any:
    """An ingestor with the app's embedder and fetcher on the test loop's engine.

    Litestar's test client runs the lifespan in a portal thread with its own event loop,
    so the app's engine cannot be driven from the test's loop.
    """
    from app.ingestion.pipeline import Ingestor

    state = app.state
    return Ingestor(
        engine,
        state.embedder,
        state.fetcher,
        state.settings.ingestion,
        owner,
        storage_quota_bytes=state.settings.limits.org_storage_bytes,
    )


@pytest.fixture
def drain_queue(app: Litestar, engine: AsyncEngine) -> Any:
    from app.ingestion.worker import drain

    async def run(target: Litestar | None = None) -> dict[str, int]:
        return await drain(make_ingestor(target or app, engine))

    return run


@pytest.fixture
async def client(app: Litestar) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with AsyncTestClient(app=app) as client:
        yield client


@dataclass
class Org:
    id: Any
    admin_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_key}"}


async def make_org(sessionmaker: async_sessionmaker[AsyncSession], name: str) -> Org:
    async with sessionmaker() as session:
        org_id, key = await create_organisation(session, name)
    return Org(org_id, key)


@pytest.fixture
async def org(sessionmaker: async_sessionmaker[AsyncSession], _clean_tables: None) -> Org:
    return await make_org(sessionmaker, "Acme")


@pytest.fixture
async def other_org(sessionmaker: async_sessionmaker[AsyncSession], _clean_tables: None) -> Org:
    return await make_org(sessionmaker, "Globex")
