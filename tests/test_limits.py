"""Rate limits (shared in PostgreSQL, per organisation, separate budgets) and quotas."""

import asyncio
import contextlib
import threading
import uuid
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app import auth
from app.auth import ApiKeyAuthMiddleware, budget_for
from app.ingestion.worker import drain
from app.main import create_app
from tests.conftest import fake_resolver, make_ingestor
from tests.helpers import assign_new_agent, bearer, create_kb, create_key, create_text_doc, in_one_rate_window


def _in_flight(app: Any) -> dict[Any, int]:
    """The questions in progress the app's auth middleware counts (by organisation or key)."""
    return next(m for m in app.middleware if isinstance(m, ApiKeyAuthMiddleware))._in_flight


async def _agents_of(c: AsyncTestClient, app: Any, engine: Any, owners: Any) -> list[str]:
    """An agent for each organisation, its knowledge base holding one ready sentence."""
    agents = []
    for owner in owners:
        kb = await create_kb(c, owner.headers)
        await create_text_doc(c, owner.headers, kb["id"], content="We open at nine on weekdays.")
        agents.append(await assign_new_agent(c, owner.headers, kb["id"]))
    assert await drain(make_ingestor(app, engine)) == {"ready": len(agents)}
    return agents


def _app(database_url, settings, **limits):
    limited = settings.model_copy(update={"limits": settings.limits.model_copy(update=limits)})
    return create_app(limited, database_url=database_url, resolver=fake_resolver, run_workers=False)


async def test_management_budget_gives_429_with_headers(database_url, settings, org, other_org):
    async with AsyncTestClient(app=_app(database_url, settings, manage_per_minute=3)) as c:
        await in_one_rate_window()
        first = await c.get("/api/knowledge", headers=org.headers)
        assert first.status_code == 200
        assert first.headers["RateLimit-Limit"] == "3"
        assert first.headers["RateLimit-Remaining"] == "2"
        assert first.headers["RateLimit-Policy"] == "3;w=60"
        await c.get("/api/knowledge", headers=org.headers)
        await c.get("/api/knowledge", headers=org.headers)
        refused = await c.get("/api/knowledge", headers=org.headers)
        assert refused.status_code == 429
        assert refused.json()["error"] == "rate_limited"
        assert refused.headers["RateLimit-Remaining"] == "0"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        # Another organisation has its own budget.
        assert (await c.get("/api/knowledge", headers=other_org.headers)).status_code == 200


async def test_limits_are_shared_across_processes(database_url, settings, org):
    """Two app instances (two replicas) count against the same PostgreSQL counters."""
    one = _app(database_url, settings, manage_per_minute=2)
    two = _app(database_url, settings, manage_per_minute=2)
    async with AsyncTestClient(app=one) as a, AsyncTestClient(app=two) as b:
        await in_one_rate_window()
        assert (await a.get("/api/knowledge", headers=org.headers)).status_code == 200
        assert (await b.get("/api/knowledge", headers=org.headers)).status_code == 200
        assert (await a.get("/api/knowledge", headers=org.headers)).status_code == 429


async def test_query_budget_is_separate_from_management(database_url, settings, org, engine):
    async with AsyncTestClient(
        app=_app(database_url, settings, manage_per_minute=1, query_per_minute=5)
    ) as c:
        await in_one_rate_window()
        kb = await create_kb(c, org.headers)
        agent = str(uuid.uuid4())
        assert (await c.get("/api/knowledge", headers=org.headers)).status_code == 429
        # The KB was created before the budget ran out; assign through the database.
        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO agent_assignments (kb_id, agent_id, org_id) VALUES (:k, :a, :o)"),
                {"k": kb["id"], "a": agent, "o": org.id},
            )
        r = await c.post(f"/api/agents/{agent}/query_knowledge", json={"query": "hi"}, headers=org.headers)
        assert r.status_code == 200
        assert r.headers["RateLimit-Limit"] == "5"


def test_the_runtime_paths_count_against_the_query_budget() -> None:
    # The tool declaration is fetched as a call starts: a bulk upload must not refuse it.
    assert budget_for("/api/agents/a1/tool") == "query"
    # The router takes these for the same routes.
    assert budget_for("/api/agents/a1/query_knowledge/") == "query"
    assert budget_for("/api//agents/a1/query_knowledge") == "query"
    assert budget_for("/api/agents/a1/queries") == "manage"
    assert budget_for("/api/agents/a1/query_knowledge/other") == "manage"


async def test_a_query_keys_refused_requests_leave_the_admins_budget_alone(database_url, settings, org):
    async with AsyncTestClient(
        app=_app(database_url, settings, manage_per_minute=3, query_per_minute=50)
    ) as c:
        await in_one_rate_window()
        key = bearer((await create_key(c, org.headers, "query"))["key"])  # one management call
        for _ in range(3):
            refused = await c.get("/api/knowledge", headers=key)
            assert (refused.status_code, refused.headers["RateLimit-Limit"]) == (403, "50")
        admin = await c.get("/api/knowledge", headers=org.headers)
        assert (admin.status_code, admin.headers["RateLimit-Remaining"]) == (200, "1")


async def test_the_tool_and_path_variants_are_served_when_the_management_budget_is_spent(
    database_url, settings, org
):
    async with AsyncTestClient(
        app=_app(database_url, settings, manage_per_minute=2, query_per_minute=5)
    ) as c:
        await in_one_rate_window()
        kb = await create_kb(c, org.headers)
        agent = await assign_new_agent(c, org.headers, kb["id"])
        assert (await c.get("/api/knowledge", headers=org.headers)).status_code == 429
        tool = await c.get(f"/api/agents/{agent}/tool", headers=org.headers)
        assert (tool.status_code, tool.headers["RateLimit-Remaining"]) == (200, "4")
        asked = await c.post(
            f"/api/agents/{agent}/query_knowledge/", json={"query": "hi"}, headers=org.headers
        )
        assert (asked.status_code, asked.headers["RateLimit-Remaining"]) == (200, "3")


async def test_documents_per_kb_quota(database_url, settings, org):
    async with AsyncTestClient(app=_app(database_url, settings, documents_per_kb=2)) as c:
        kb = await create_kb(c, org.headers)
        # Two contents: the same one twice would be refused as a duplicate (409).
        await create_text_doc(c, org.headers, kb["id"], content="We open at nine.")
        await create_text_doc(c, org.headers, kb["id"], content="We close at five.")
        r = await c.post(
            f"/api/knowledge/{kb['id']}/documents", json={"title": "t", "content": "x"}, headers=org.headers
        )
        assert r.status_code == 403
        assert r.json() == {
            "error": "quota_exceeded",
            "detail": "this knowledge base holds the maximum of 2 documents",
        }
        assert len((await c.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()["documents"]) == 2


async def test_storage_quota(database_url, settings, org):
    async with AsyncTestClient(app=_app(database_url, settings, org_storage_bytes=2048)) as c:
        kb = await create_kb(c, org.headers)
        await create_text_doc(c, org.headers, kb["id"], content="a" * 1500)
        r = await c.post(
            f"/api/knowledge/{kb['id']}/documents",
            json={"title": "t", "content": "b" * 1000},
            headers=org.headers,
        )
        assert r.status_code == 403
        assert r.json()["error"] == "quota_exceeded"


async def test_daily_embedding_quota_defers_the_document(database_url, settings, org, engine):
    from app.ingestion.worker import drain
    from tests.conftest import make_ingestor

    app = _app(database_url, settings)
    async with AsyncTestClient(app=app) as c:
        kb = await create_kb(c, org.headers)
        first = await create_text_doc(c, org.headers, kb["id"], content="word " * 150)
        doc = await create_text_doc(c, org.headers, kb["id"], content="other " * 150)
        huge = await create_text_doc(c, org.headers, kb["id"], content="many words here " * 200)
        ingestor = make_ingestor(app, engine)
        ingestor.quota_tokens_per_day = 300
        # The first fits the day's quota, the second must wait, the third can never fit.
        assert await drain(ingestor) == {"ready": 1, "retry": 1, "failed": 1}
        got = (await c.get(f"/api/knowledge/{kb['id']}/documents/{huge['id']}", headers=org.headers)).json()
        assert got["error"].startswith("the document needs ")
        assert got["error"].endswith("embedding tokens, more than the daily quota of 300")
        assert (
            await c.get(f"/api/knowledge/{kb['id']}/documents/{first['id']}", headers=org.headers)
        ).json()["status"] == "ready"
        got = (await c.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)).json()
    assert got["status"] == "pending"
    assert got["attempts"] == 0
    assert got["error"].startswith("the organisation's daily embedding quota (300 tokens) is used up")
    async with engine.connect() as conn:
        wait = (
            await conn.execute(
                text("SELECT lease_expires_at > now() FROM documents WHERE id = :d"), {"d": doc["id"]}
            )
        ).scalar_one()
    assert wait is True


async def test_an_organisation_has_at_most_so_many_calls_in_progress(
    database_url, settings, org, other_org, engine
):
    """The per-minute budget bounds a rate, not a burst: beyond its questions in progress, an
    organisation's next question is refused at once; its tool declaration and another
    organisation's question go through, and the slot is free again when the question ends."""
    app = _app(database_url, settings, query_in_flight=1)
    stalled, release = threading.Event(), threading.Event()
    async with AsyncTestClient(app=app) as c:
        agents = await _agents_of(c, app, engine, (org, other_org))
        embedder = app.state.query_service.embedder
        real_embed_query = embedder.embed_query

        async def embed_query(text: str, *, timeout: float) -> list[float]:
            if text == "when do you open on saturdays":
                stalled.set()
                await asyncio.to_thread(release.wait, 10)
            return await real_embed_query(text, timeout=timeout)

        embedder.embed_query = embed_query

        def ask(headers: dict[str, str], agent: str, query: str) -> Any:
            return c.post(f"/api/agents/{agent}/query_knowledge", json={"query": query}, headers=headers)

        # The test client blocks its caller until the response: the stalled call gets a thread.
        first = asyncio.create_task(
            asyncio.to_thread(asyncio.run, ask(org.headers, agents[0], "When do you open on Saturdays?"))
        )
        assert await asyncio.to_thread(stalled.wait, 10)
        refused = await ask(org.headers, agents[0], "When do you open?")
        # A call starting meanwhile still gets its tool declaration: without it, no knowledge.
        declared = await c.get(f"/api/agents/{agents[0]}/tool", headers=org.headers)
        other = await ask(other_org.headers, agents[1], "When do you open?")
        release.set()
        answered = await first
        again = await ask(org.headers, agents[0], "When do you open?")

    assert (refused.status_code, refused.json()["error"], refused.headers["Retry-After"]) == (
        429,
        "rate_limited",
        "1",
    )
    assert (
        refused.json()["detail"] == "1 calls of this organisation are already in progress here; retry shortly"
    )
    assert [r.status_code for r in (declared, other, answered, again)] == [200, 200, 200, 200]
    assert _in_flight(app) == {}  # every place given back, by organisation and by key


async def test_a_call_over_the_cap_is_refused_before_its_key_is_looked_up(
    database_url, settings, org, other_org, engine
):
    """A burst must not queue for pooled connections only to be refused: while one call holds
    the pool's only connection, the same organisation's next call is a 429 at once, not a 503
    after the pool's timeout. Another organisation's key, never seen by this process, waits for
    the pool as before, and is told no connection came free, not that the database is down."""
    one_connection = settings.db.model_copy(update={"pool_size": 1, "max_overflow": 0, "pool_timeout_s": 0.3})
    app = _app(database_url, settings.model_copy(update={"db": one_connection}), query_in_flight=1)
    stalled, release = threading.Event(), threading.Event()
    async with AsyncTestClient(app=app) as c:
        agents = await _agents_of(c, app, engine, (org, other_org))
        service = app.state.query_service
        real_embed_query = service.embedder.embed_query

        async def embed_query(text: str, *, timeout: float) -> list[float]:
            if text == "when do you open on saturdays":
                async with service.engine.connect():  # the pool's only connection
                    stalled.set()
                    await asyncio.to_thread(release.wait, 10)
            return await real_embed_query(text, timeout=timeout)

        service.embedder.embed_query = embed_query

        def ask(headers: dict[str, str], agent: str, query: str) -> Any:
            return c.post(f"/api/agents/{agent}/query_knowledge", json={"query": query}, headers=headers)

        first = asyncio.create_task(
            asyncio.to_thread(asyncio.run, ask(org.headers, agents[0], "When do you open on Saturdays?"))
        )
        assert await asyncio.to_thread(stalled.wait, 10)
        refused = await ask(org.headers, agents[0], "When do you open?")
        busy = await ask(other_org.headers, agents[1], "When do you open?")
        release.set()
        answered = await first
        # Each call gave its place back, the refused one included: the cap of one lets these in.
        afterwards = [await ask(org.headers, agents[0], "When do you open?") for _ in range(2)]

    assert (refused.status_code, refused.headers["Retry-After"], refused.json()) == (
        429,
        "1",
        {
            "error": "rate_limited",
            "detail": "1 calls of this organisation are already in progress here; retry shortly",
        },
    )
    assert (busy.status_code, busy.headers["Retry-After"], busy.json()) == (
        503,
        "2",
        {
            "error": "unavailable",
            "detail": "no database connection came free in time (too many requests at once, or a "
            "database that does not answer); retry shortly",
        },
    )
    assert [r.status_code for r in (answered, *afterwards)] == [200, 200, 200]
    assert _in_flight(app) == {}  # every place given back, by organisation and by key


async def test_a_key_revoked_after_a_call_is_refused_on_the_next(database_url, settings, org):
    """The process remembers a key's organisation only to count its calls: a key revoked
    after a call is refused on the next call, which is looked up as every call is."""
    app = _app(database_url, settings, query_in_flight=1)
    async with AsyncTestClient(app=app) as c:
        kb = await create_kb(c, org.headers)
        agent = await assign_new_agent(c, org.headers, kb["id"])
        key = await create_key(c, org.headers, "query")
        path = f"/api/agents/{agent}/query_knowledge"
        before = await c.post(path, json={"query": "When do you open?"}, headers=bearer(key["key"]))
        assert (await c.delete(f"/api/keys/{key['id']}", headers=org.headers)).status_code == 204
        after = await c.post(path, json={"query": "When do you open?"}, headers=bearer(key["key"]))
        # The refused call gave its organisation's only place back.
        others = [await c.post(path, json={"query": "When?"}, headers=org.headers) for _ in range(2)]
    assert before.status_code == 200
    assert (after.status_code, after.json()) == (
        401,
        {"error": "unauthorized", "detail": "unknown or revoked API key"},
    )
    assert [r.status_code for r in others] == [200, 200]
    assert _in_flight(app) == {}  # every place given back, by organisation and by key


async def test_a_new_keys_calls_are_capped_before_its_first_lookup_ends(database_url, settings, org):
    """The first burst of a key this process has not let in yet (after a restart, a new key)
    is bounded too: until its statement names the organisation, a call counts against its key."""
    app = _app(database_url, settings, query_in_flight=1)
    entered, release = threading.Event(), threading.Event()
    real_raw_connection = auth.raw_connection

    @contextlib.asynccontextmanager
    async def raw_connection(engine: Any) -> Any:
        if not entered.is_set():  # the new key's first call, stopped before its statement
            entered.set()
            await asyncio.to_thread(release.wait, 10)
        async with real_raw_connection(engine) as conn:
            yield conn

    async with AsyncTestClient(app=app) as c:
        kb = await create_kb(c, org.headers)
        agent = await assign_new_agent(c, org.headers, kb["id"])
        key = await create_key(c, org.headers, "query")
        path = f"/api/agents/{agent}/query_knowledge"

        def ask() -> Any:
            return c.post(path, json={"query": "When do you open?"}, headers=bearer(key["key"]))

        auth.raw_connection = raw_connection
        try:
            first = asyncio.create_task(asyncio.to_thread(asyncio.run, ask()))
            assert await asyncio.to_thread(entered.wait, 10)
            refused = await ask()
            release.set()
            answered = await first
        finally:
            auth.raw_connection = real_raw_connection
        afterwards = [await ask() for _ in range(2)]

    assert (refused.status_code, refused.headers["Retry-After"], refused.json()) == (
        429,
        "1",
        {
            "error": "rate_limited",
            "detail": "1 calls with this key are already in progress here; retry shortly",
        },
    )
    assert [r.status_code for r in (answered, *afterwards)] == [200, 200, 200]
    assert _in_flight(app) == {}  # every place given back, by organisation and by key


async def test_a_call_over_the_per_minute_budget_gives_its_place_back(database_url, settings, org):
    app = _app(database_url, settings, query_in_flight=1, query_per_minute=1)
    async with AsyncTestClient(app=app) as c:
        kb = await create_kb(c, org.headers)
        agent = await assign_new_agent(c, org.headers, kb["id"])
        keys = [(await create_key(c, org.headers, "query"))["key"] for _ in range(2)]
        path = f"/api/agents/{agent}/query_knowledge"
        await in_one_rate_window()
        # A key this process knows, twice, then one it does not: counted by organisation, then
        # by key, before the statement that finds the minute's budget spent.
        responses = [
            await c.post(path, json={"query": "When do you open?"}, headers=bearer(key))
            for key in (keys[0], keys[0], keys[1])
        ]
        held = dict(_in_flight(app))
    assert [r.status_code for r in responses] == [200, 429, 429]
    assert [r.json()["detail"] for r in responses[1:]] == [
        "rate limit of 1 query requests per minute reached; retry in " + r.headers["Retry-After"] + " s"
        for r in responses[1:]
    ]
    assert held == {}
