"""Proof under faults: PostgreSQL restarted under load, ingestion workers killed with
SIGKILL or stopped with SIGTERM. These start real processes; each is bounded in time."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import httpx
import pgserver
import pytest
from litestar.testing import AsyncTestClient
from pgserver._commands import pg_ctl
from sqlalchemy import text

from app.db.migrate import upgrade
from app.ingestion.worker import drain
from app.main import create_app
from tests.conftest import REPO, fake_resolver, make_ingestor, make_org
from tests.helpers import create_kb, create_text_doc, free_port, wait_until_up

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def private_pg():
    """A PostgreSQL of this test's own, so stopping it disturbs nobody else."""
    with tempfile.TemporaryDirectory(prefix="vk-fault-pg-") as data_dir:
        server = pgserver.get_server(data_dir, cleanup_mode="stop")
        upgrade(server.get_uri())
        yield server
        server.cleanup()


async def _org_and_app(private_pg, settings):
    """An organisation in the private PostgreSQL and an app on it (no in-process workers)."""
    from app.db.engine import make_engine, make_sessionmaker

    url = private_pg.get_uri()
    engine = make_engine(url, settings)
    org = await make_org(make_sessionmaker(engine), "Acme")
    await engine.dispose()
    return org, create_app(settings, database_url=url, resolver=fake_resolver, run_workers=False)


async def test_postgres_restart_fails_fast_with_503_then_recovers(private_pg, settings, caplog):
    org, app = await _org_and_app(private_pg, settings)
    async with AsyncTestClient(app=app, timeout=30) as c:
        kb = await create_kb(c, org.headers)
        for i in range(5):
            await create_text_doc(c, org.headers, kb["id"], content=f"Document {i}.")

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=private_pg.pgdata, user=private_pg.system_user)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="app.errors"):
            outages = [await c.get("/api/knowledge", headers=org.headers) for _ in range(5)]
        assert [r.status_code for r in outages] == [503] * 5
        assert outages[0].json() == {
            "error": "unavailable",
            "detail": "the database is unavailable; retry shortly",
        }
        assert outages[0].headers["Retry-After"] == "2"
        # Fail fast, judged by the cause rather than a stopwatch: each request failed on a
        # connection attempt that the missing server socket refused at once. A request that
        # waited out the connect timeout or the pool would be logged as a TimeoutError.
        assert [r.getMessage() for r in caplog.records if r.name == "app.errors"] == [
            "database unavailable on GET /api/knowledge: FileNotFoundError"
        ] * 5
        ready = await c.get("/ready")
        assert ready.status_code == 503

        private_pg.ensure_postgres_running()
        r = await c.get(f"/api/knowledge/{kb['id']}", headers=org.headers)
        assert r.status_code == 200
        assert len(r.json()["documents"]) == 5
        assert (await c.get("/ready")).status_code == 200
        stats = private_pg.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'voice-knowledge';"
        )
        in_use = int(stats.split("\n")[2].strip())
        assert in_use <= settings.db.pool_size + settings.db.max_overflow


async def test_postgres_restart_under_concurrent_load(private_pg, settings):
    """Eight callers keep asking while PostgreSQL stops and starts again: every request that
    starts and ends during the outage is a 503 with Retry-After, none is ever a 500, every
    request after the restart succeeds, connections stay bounded and nothing is lost or
    doubled (documents and chunks)."""
    from app.db.engine import make_engine, make_sessionmaker

    # Hundreds of calls in a few seconds: the management rate limit would answer 429.
    settings = settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"manage_per_minute": 0})}
    )
    url = private_pg.get_uri()
    engine = make_engine(url, settings)
    org = await make_org(make_sessionmaker(engine), "Acme")
    app = create_app(settings, database_url=url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=app, timeout=30) as c:
        kb = await create_kb(c, org.headers)
        for i in range(6):
            await create_text_doc(c, org.headers, kb["id"], content=f"Document {i}. " * 40)
        assert await drain(make_ingestor(app, engine)) == {"ready": 6}
        async with engine.connect() as conn:
            chunks_before = (await conn.execute(text("SELECT count(*) FROM chunks"))).scalar()
        assert chunks_before > 0

        # (started, finished, status, Retry-After) of every request.
        log: list[tuple[float, float, int, str | None]] = []
        logged = asyncio.Condition()
        stop = asyncio.Event()

        async def caller() -> None:
            while not stop.is_set():
                started = time.monotonic()
                r = await c.get(f"/api/knowledge/{kb['id']}", headers=org.headers)
                async with logged:
                    log.append((started, time.monotonic(), r.status_code, r.headers.get("Retry-After")))
                    logged.notify_all()
                await asyncio.sleep(0.01)

        async def until_finished(since: float, count: int) -> None:
            """Wait until ``count`` requests started at ``since`` or later have finished: each
            phase lasts until it has seen enough requests, not for a guessed time. The bound
            only stops a hang."""
            async with asyncio.timeout(60), logged:
                await logged.wait_for(lambda: sum(1 for s, _, _, _ in log if s >= since) >= count)

        callers = [asyncio.create_task(caller()) for _ in range(8)]
        await until_finished(0.0, 8)
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=private_pg.pgdata, user=private_pg.system_user)
        down_from = time.monotonic()
        await until_finished(down_from, 8)
        down_until = time.monotonic()
        private_pg.ensure_postgres_running()
        up_from = time.monotonic()
        await until_finished(up_from, 8)
        stop.set()
        await asyncio.gather(*callers)

    assert all(status != 500 for _, _, status, _ in log)
    outage = [(status, retry) for s, e, status, retry in log if s >= down_from and e <= down_until]
    after = [status for s, _, status, _ in log if s >= up_from]
    assert set(outage) == {(503, "2")}
    assert set(after) == {200}
    async with engine.connect() as conn:
        documents = (
            await conn.execute(text("SELECT count(*) FROM documents WHERE kb_id = :k"), {"k": kb["id"]})
        ).scalar()
        chunks_after = (await conn.execute(text("SELECT count(*) FROM chunks"))).scalar()
        duplicates = (
            await conn.execute(
                text(
                    "SELECT count(*) FROM (SELECT document_id, ordinal FROM chunks GROUP BY 1, 2 HAVING count(*) > 1) d"
                )
            )
        ).scalar()
    await engine.dispose()
    assert (documents, chunks_after, duplicates) == (6, chunks_before, 0)
    stats = private_pg.psql(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'voice-knowledge';"
    )
    assert int(stats.split("\n")[2].strip()) <= settings.db.pool_size + settings.db.max_overflow


async def test_postgres_restarted_between_requests_costs_no_failed_request(private_pg, settings):
    """Pooled connections to the old server are dropped at checkout (no pre-ping round trip):
    the first request after a restart, with no request during the outage, succeeds."""
    org, app = await _org_and_app(private_pg, settings)
    async with AsyncTestClient(app=app, timeout=30) as c:
        kb = await create_kb(c, org.headers)
        # Several requests at once, so the pool holds several connections to the old server.
        await asyncio.gather(*(c.get(f"/api/knowledge/{kb['id']}", headers=org.headers) for _ in range(4)))
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=private_pg.pgdata, user=private_pg.system_user)
        private_pg.ensure_postgres_running()
        statuses = [
            (await c.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).status_code for _ in range(6)
        ]
        assert statuses == [200] * 6


def _hanging_server() -> tuple[socket.socket, int]:
    """Accepts connections and never answers: an embedding provider that stalls."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock, sock.getsockname()[1]


def _worker_env(database_url: str, port: int, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "INGESTION__", "EMBEDDING__"))}
    env.update(
        DATABASE_URL=database_url,
        OPENAI_API_KEY="sk-test",
        OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
        EMBEDDING__PROVIDER="openai",
        INGESTION__POLL_INTERVAL_S="0.2",
        LOG_LEVEL="WARNING",
        **extra,
    )
    return env


async def _wait_for(engine, sql: str, params: dict, expected, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with engine.connect() as conn:
            if (await conn.execute(text(sql), params)).scalar() == expected:
                return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {sql!r} == {expected!r}")


async def test_worker_killed_mid_document_completes_exactly_once(client, app, org, engine, database_url):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        content="# Hours\nOpen nine to five.\n\n# Parking\nBehind.",
        content_type="markdown",
    )
    sock, port = _hanging_server()
    worker = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "worker", "--concurrency", "1"],
        cwd=REPO,
        env=_worker_env(database_url, port, INGESTION__LEASE_S="5"),
    )
    try:
        await _wait_for(engine, "SELECT status FROM documents WHERE id = :d", {"d": doc["id"]}, "processing")
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
        sock.close()
    async with engine.connect() as conn:
        owner = (
            await conn.execute(text("SELECT lease_owner FROM documents WHERE id = :d"), {"d": doc["id"]})
        ).scalar()
    assert owner is not None  # the dead worker still holds the lease
    # Nobody takes the document while the lease lives; once it expires, another worker does.
    assert await drain(make_ingestor(app, engine)) == {}
    await _wait_for(
        engine, "SELECT lease_expires_at < now() FROM documents WHERE id = :d", {"d": doc["id"]}, True, 15
    )
    assert await drain(make_ingestor(app, engine)) == {"ready": 1}
    got = (await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)).json()
    assert (got["status"], got["chunk_count"], got["attempts"]) == ("ready", 2, 2)
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text("SELECT count(*), count(DISTINCT ordinal) FROM chunks WHERE document_id = :d"),
                {"d": doc["id"]},
            )
        ).one()
    assert tuple(rows) == (2, 2)


async def test_sigterm_releases_in_flight_jobs(client, org, engine, database_url):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="Some text to embed.")
    sock, port = _hanging_server()
    worker = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "worker", "--concurrency", "1"],
        cwd=REPO,
        env=_worker_env(database_url, port, INGESTION__LEASE_S="120"),
    )
    try:
        await _wait_for(engine, "SELECT status FROM documents WHERE id = :d", {"d": doc["id"]}, "processing")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
        sock.close()
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT status, lease_owner, lease_expires_at, attempts FROM documents WHERE id = :d"),
                {"d": doc["id"]},
            )
        ).one()
    # Released at once for the next worker, and the interrupted try does not count.
    assert tuple(row) == ("pending", None, None, 0)


async def test_sigterm_lets_in_flight_requests_finish(org, database_url):
    """`vk serve` on SIGTERM stops accepting, finishes the request in flight, then exits by
    the signal it was sent."""
    sock, stub_port = _hanging_server()  # the answering model stalls: the request takes its full deadline
    sock.setblocking(False)  # accepted on the event loop below
    model_call: socket.socket | None = None
    port = free_port()
    env = _worker_env(database_url, stub_port, INGESTION__WORKERS="0", QUERY__DEADLINE_S="2.0")
    env["EMBEDDING__PROVIDER"] = "lexical"
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--no-migrate"], cwd=REPO, env=env
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_until_up(base)
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            kb = (await http.post("/api/knowledge", json={"title": "FAQ"}, headers=org.headers)).json()
            await http.post(
                f"/api/knowledge/{kb['id']}/documents",
                json={"title": "Parking", "content": "Free parking is behind the building."},
                headers=org.headers,
            )
            agent = str(uuid.uuid4())
            await http.put(
                f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers
            )
            # Index it with a one-shot worker so the query has something to find.
            done = subprocess.run(
                [sys.executable, "-m", "app.cli", "worker", "--once"],
                cwd=REPO,
                env={**env, "EMBEDDING__PROVIDER": "lexical"},
                capture_output=True,
                timeout=120,
                check=True,
            )
            assert b"'ready': 1" in done.stdout
            in_flight = asyncio.create_task(
                http.post(
                    f"/api/agents/{agent}/query_knowledge",
                    json={"query": "Where is parking?"},
                    headers=org.headers,
                )
            )
            # Signal only once the request is surely in flight: its handler is waiting for the
            # model, whose request line has reached the stub. The bound only stops a hang.
            loop = asyncio.get_running_loop()
            head = b""
            async with asyncio.timeout(30):
                model_call, _ = await loop.sock_accept(sock)
                while b"\r\n" not in head and (part := await loop.sock_recv(model_call, 4096)):
                    head += part
            assert head.startswith(b"POST /v1/chat/completions "), head
            server.send_signal(signal.SIGTERM)
            response = await in_flight
            assert response.status_code == 200
            assert response.json()["degraded"] is True  # the stalled model was abandoned at the deadline
        # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells why.
        assert server.wait(timeout=40) == -signal.SIGTERM
    finally:
        if server.poll() is None:
            server.kill()
        if model_call is not None:
            model_call.close()
        sock.close()


class _OutageMidDocument:
    """The service's embedder, but its first batch stops the private PostgreSQL and fails:
    the document's outcome cannot then be written either."""

    def __init__(self, embedder, server) -> None:
        self.embedder = embedder
        self.server = server
        self.outages = 0

    def __getattr__(self, name):
        return getattr(self.embedder, name)

    async def embed_documents(self, texts):
        if self.outages == 0:
            self.outages += 1
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user)
            from app.embeddings.base import EmbeddingError

            raise EmbeddingError("the provider went away too", retryable=True)
        return await self.embedder.embed_documents(texts)


async def test_a_database_outage_mid_document_leaves_the_worker_loops_running(private_pg, settings, caplog):
    from app.db.engine import make_engine
    from app.embeddings.factory import build_embedder
    from app.ingestion.fetch import Fetcher
    from app.ingestion.pipeline import Ingestor
    from app.ingestion.worker import WorkerPool

    org, app = await _org_and_app(private_pg, settings)
    async with AsyncTestClient(app=app, timeout=30) as c:
        kb = await create_kb(c, org.headers)
        doc = await create_text_doc(c, org.headers, kb["id"], content="Parking is behind the building.")
    engine = make_engine(private_pg.get_uri(), settings)
    fetcher = Fetcher(resolver=fake_resolver, max_bytes=1_000_000, timeout_s=5.0)
    embedder = _OutageMidDocument(build_embedder(settings, None), private_pg)
    # The shortest lease: the document is taken again once it runs out.
    ingestion = settings.ingestion.model_copy(update={"lease_s": 5.0, "poll_interval_s": 0.2})
    pool = WorkerPool(
        Ingestor(engine, embedder, fetcher, ingestion, "outage"), concurrency=1, poll_interval_s=0.2
    )
    await pool.start()
    try:
        with caplog.at_level(logging.WARNING, logger="app.ingestion.worker"):
            for _ in range(300):
                if any("could not finish document" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.1)
        assert [r.getMessage() for r in caplog.records if "could not finish" in r.getMessage()] == [
            f"worker 0 could not finish document {doc['id']}; it will be retried"
        ]
        private_pg.ensure_postgres_running()
        status = None
        for _ in range(300):  # the lease (5 s) runs out, then the document is taken again
            async with engine.connect() as conn:
                status = (
                    await conn.execute(text("SELECT status FROM documents WHERE id = :id"), {"id": doc["id"]})
                ).scalar_one()
            if status == "ready":
                break
            await asyncio.sleep(0.1)
        assert (status, embedder.outages) == ("ready", 1)
        assert [task.done() for task in pool._tasks] == [False]
    finally:
        await pool.stop(grace_s=5)
        await fetcher.aclose()
        await engine.dispose()


def _freeze(server, sig: int) -> None:
    """SIGSTOP or SIGCONT to the private PostgreSQL's postmaster and every backend: a server
    that hangs, neither closing connections nor answering."""
    import psutil

    postmaster = psutil.Process(server.get_postmaster_info().pid)
    for process in [postmaster, *postmaster.children(recursive=True)]:
        process.send_signal(sig)


async def test_a_database_that_hangs_is_a_503_not_a_request_that_waits_for_good(private_pg, settings, caplog):
    from tests.helpers import assign_new_agent

    # Statements capped at 1 s by the server, 3 s by the client; the voice runtime's calls by
    # their own 2.5 s deadline. A frozen server can enforce neither of its own.
    quick = settings.model_copy(update={"db": settings.db.model_copy(update={"statement_timeout_ms": 1000})})
    org, app = await _org_and_app(private_pg, quick)
    async with AsyncTestClient(app=app, timeout=60) as c:
        kb = await create_kb(c, org.headers)
        agent = await assign_new_agent(c, org.headers, kb["id"])
        assert (await c.get("/api/knowledge", headers=org.headers)).status_code == 200  # connections pooled
        _freeze(private_pg, signal.SIGSTOP)
        try:
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="app.errors"):
                call = await c.post(
                    f"/api/agents/{agent}/query_knowledge",
                    json={"query": "Where can I park?"},
                    headers=org.headers,
                )
                listing = await c.get("/api/knowledge", headers=org.headers)
        finally:
            _freeze(private_pg, signal.SIGCONT)
        assert [(r.status_code, r.json()["error"]) for r in (call, listing)] == [(503, "unavailable")] * 2
        assert [r.getMessage() for r in caplog.records if r.name == "app.errors"] == [
            f"database unavailable on POST /api/agents/{agent}/query_knowledge: TimeoutError",
            "database unavailable on GET /api/knowledge: TimeoutError",
        ]
        # The server thawed, the next calls go through.
        for _ in range(50):
            if (await c.get("/api/knowledge", headers=org.headers)).status_code == 200:
                break
            await asyncio.sleep(0.2)
        assert (await c.get("/api/knowledge", headers=org.headers)).status_code == 200
