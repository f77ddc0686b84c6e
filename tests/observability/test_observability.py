"""Observability: request ids, Prometheus metrics and JSON log lines."""

import os
import subprocess
import sys
import uuid

import pytest
from litestar.testing import AsyncTestClient

from app.main import create_app
from tests.conftest import REPO
from tests.helpers import assign_new_agent, bearer, create_kb, in_one_rate_window, sample


@pytest.mark.parametrize(("sent", "kept"), [("abc-123", True), ("bad id with spaces", False)])
async def test_request_id_is_echoed_or_made(client, sent, kept):
    r = await client.get("/health", headers={"X-Request-ID": sent})
    if kept:
        assert r.headers["X-Request-ID"] == "abc-123"
    else:
        assert r.headers["X-Request-ID"] != sent
        assert len(r.headers["X-Request-ID"]) == 32


async def test_query_series_exist_from_the_start_and_count_each_call(client, org):
    """The query series are exported at zero before any call (run alone, this test scrapes
    before its process has answered one), then count each call."""
    kb = await create_kb(client, org.headers, "Nothing yet")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    before = (await client.get("/metrics")).text
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": "When are you open?"}, headers=org.headers
    )
    after = (await client.get("/metrics")).text

    assert r.json()["status"] == "not_found"
    for stage in ("embed", "search", "llm", "total", "own"):
        count = "vk_query_stage_milliseconds_count"
        assert sample(after, count, f'stage="{stage}"') == sample(before, count, f'stage="{stage}"') + 1
    outcomes = "vk_query_outcomes_total"
    assert (
        sample(after, outcomes, 'outcome="not_found"') == sample(before, outcomes, 'outcome="not_found"') + 1
    )
    for unchanged in ("answered", "unavailable", "cached", "degraded"):
        label = f'outcome="{unchanged}"'
        assert sample(after, outcomes, label) == sample(before, outcomes, label)
    assert 'vk_http_requests_total{app_name="voice-knowledge",method="PUT"' in after
    assert "# TYPE vk_ingestion_jobs_total counter" in after


async def test_json_log_lines_carry_request_and_agent_ids():
    import io
    import json
    import logging

    from app.observability.logging import JsonFormatter
    from app.observability.middleware import request_id_middleware, send_request_id

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("app.test.json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    async def inner(scope, receive, send):
        logger.info("answered %s", "ok")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    sent = []

    async def send(message):
        sent.append(message)

    agent = str(uuid.uuid4())
    scope = {
        "type": "http",
        "path": f"/api/agents/{agent}/query_knowledge",
        "headers": [(b"x-request-id", b"req-42")],
    }
    await request_id_middleware(inner)(scope, None, send)
    line = json.loads(stream.getvalue())
    assert (line["msg"], line["request_id"], line["agent_id"], line["level"]) == (
        "answered ok",
        "req-42",
        agent,
        "INFO",
    )
    # The response's header comes from the app's before_send hook, with the same id.
    await send_request_id(sent[0], scope)
    assert (b"x-request-id", b"req-42") in [(k.lower(), v) for k, v in sent[0]["headers"]]


async def test_every_response_carries_the_request_id(database_url, settings, org):
    # Errors answered outside the route's own middleware (authentication's 401 and 429,
    # routing's 404 and 405) used to go out without it.
    limits = settings.limits.model_copy(update={"manage_per_minute": 2})
    app = create_app(
        settings.model_copy(update={"limits": limits}), database_url=database_url, run_workers=False
    )
    calls = [
        ("GET", "/health", {}, 200),
        ("GET", "/api/knowledge", {}, 401),
        ("GET", "/api/knowledge", bearer("vk_not-a-real-key"), 401),
        ("GET", "/no/such/route", org.headers, 404),
        ("PATCH", "/api/knowledge", org.headers, 405),
        ("OPTIONS", "/api/knowledge", org.headers, 204),
        ("GET", "/api/knowledge/not-a-uuid", org.headers, 400),
        ("GET", f"/api/knowledge/{uuid.uuid4()}", org.headers, 429),
    ]
    async with AsyncTestClient(app=app) as client:
        await in_one_rate_window()
        for i, (method, path, headers, status) in enumerate(calls):
            sent = f"call-{i}"
            r = await client.request(method, path, headers={**headers, "X-Request-ID": sent})
            assert (method, path, r.status_code, r.headers.get("X-Request-ID")) == (
                method,
                path,
                status,
                sent,
            )
        made = await client.get("/api/knowledge")
        assert made.status_code == 401
        assert len(made.headers["X-Request-ID"]) == 32


def test_a_key_sent_in_a_query_string_is_masked_in_the_access_line():
    import logging

    from app.observability.logging import RedactQuerySecrets, configure_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging("INFO")
        access = logging.getLogger("uvicorn.access")
        assert [type(f) for f in access.filters] == [RedactQuerySecrets]
    finally:
        root.handlers[:], root.level = handlers, level
    # As uvicorn logs a request: client, method, path with its query, HTTP version, status.
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5555", "GET", "/api/knowledge?limit=5&api_key=vk_live_secret&Token=t0k#x", "1.1", 401),
        None,
    )  # fmt: skip
    assert RedactQuerySecrets().filter(record) is True
    assert record.getMessage() == (
        '127.0.0.1:5555 - "GET /api/knowledge?limit=5&api_key=[redacted]&Token=[redacted]#x HTTP/1.1" 401'
    )


def _requests(body: str, method: str, path: str, status: int) -> float:
    """vk_http_requests_total for one method, route and status (0 when not yet counted)."""
    labels = f'app_name="voice-knowledge",method="{method}",path="{path}",status_code="{status}"'
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith(f"vk_http_requests_total{{{labels}}} ")
    )


async def test_a_refused_key_is_counted_as_the_401_it_got(client, org):
    # The key check raises its errors outside the route; they were counted as 200s.
    before = (await client.get("/metrics")).text
    refused = await client.get("/api/knowledge", headers={"Authorization": "Bearer vk_not_a_key"})
    missing = await client.get("/api/knowledge")
    after = (await client.get("/metrics")).text
    assert (refused.status_code, missing.status_code) == (401, 401)
    path = "/api/knowledge"
    assert _requests(after, "GET", path, 401) == _requests(before, "GET", path, 401) + 2
    assert _requests(after, "GET", path, 200) == _requests(before, "GET", path, 200)


def _metrics_process(folder, cache_bytes: int, *, stay: bool):
    """A process writing its metrics to ``folder`` as a server process does: KB copies of
    ``cache_bytes`` held, one answered call counted; it exits, or waits to be stopped."""
    code = (
        "import sys\n"
        "from app.observability.metrics import QUERY_OUTCOMES, VECTOR_CACHE_BYTES\n"
        f"VECTOR_CACHE_BYTES.set({cache_bytes})\n"
        "QUERY_OUTCOMES.labels('answered').inc()\n"
        "print('set', flush=True)\n" + ("sys.stdin.read()\n" if stay else "")
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    child = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdout is not None
    assert child.stdout.readline() == b"set\n"
    if not stay:
        assert child.wait(timeout=30) == 0
    return child


async def test_a_dead_server_process_leaves_the_live_gauges_but_not_the_counters(app, tmp_path, monkeypatch):
    # A server process killed outright held 5,000 bytes of KB copies; its replacement holds
    # 700. The memory held now is 700, while the calls the dead one answered still count.
    dead = _metrics_process(tmp_path, 5000, stay=False)
    live = _metrics_process(tmp_path, 700, stay=True)
    try:
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        async with AsyncTestClient(app=app) as client:
            first = (await client.get("/metrics")).text
            second = (await client.get("/metrics")).text
        for body in (first, second):
            assert sample(body, "vk_vector_cache_bytes") == 700
            assert sample(body, "vk_query_outcomes_total", 'outcome="answered"') == 2
        assert sorted(p.name for p in tmp_path.glob("gauge_livesum_*.db")) == [f"gauge_livesum_{live.pid}.db"]
        assert (tmp_path / f"counter_{dead.pid}.db").exists()
    finally:
        live.communicate(timeout=30)
