"""Scheduled re-sync of URL documents (documents.sync_interval_s / next_sync_at): a due
document is fetched again conditionally; a 304 changes and embeds nothing, new content is
re-indexed."""

from __future__ import annotations

import httpx
from sqlalchemy import text

from app.ingestion.pipeline import Ingestor
from app.ingestion.worker import drain
from tests.conftest import PUBLIC_IP
from tests.crawl.conftest import Counted
from tests.helpers import create_kb

LAST_MODIFIED = "Wed, 21 Oct 2026 07:28:00 GMT"


def page(words: str) -> bytes:
    return (
        f"<html><head><title>Parking</title></head><body><main><p>{words}</p></main></body></html>".encode()
    )


async def make_due(engine, doc_id: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE documents SET next_sync_at = now() - interval '1 second' WHERE id = :d"),
            {"d": doc_id},
        )


async def sync_state(engine, doc_id: str) -> tuple[bool, str, list[str]]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT next_sync_at > now() AS later, status FROM documents WHERE id = :d"),
                {"d": doc_id},
            )
        ).one()
        chunks = (
            await conn.execute(
                text("SELECT text FROM chunks WHERE document_id = :d ORDER BY ordinal"), {"d": doc_id}
            )
        ).scalars()
        return row.later, row.status, list(chunks)


async def test_due_url_document_is_refetched_conditionally(client, app, org, engine, respx_mock):
    route = respx_mock.get(f"https://{PUBLIC_IP}/parking").mock(
        return_value=httpx.Response(
            200,
            content=page("Park on level two."),
            headers={"Content-Type": "text/html", "ETag": '"v1"', "Last-Modified": LAST_MODIFIED},
        )
    )
    counted = Counted(app.state.embedder)
    ingestor = Ingestor(engine, counted, app.state.fetcher, app.state.settings.ingestion, "test-worker")
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://help.example.com/parking", "sync_interval_s": 3600},
        headers=org.headers,
    )
    doc = r.json()
    assert await drain(ingestor) == {"ready": 1}
    assert counted.texts == ["Parking\n\nPark on level two."]
    assert await sync_state(engine, doc["id"]) == (True, "ready", ["Park on level two."])

    # Not due: maintenance queues nothing and nothing is fetched.
    await ingestor.maintenance()
    assert await drain(ingestor) == {}
    assert route.call_count == 1

    # Due, unchanged: a conditional request, a 304, no extraction, no embedding.
    route.mock(return_value=httpx.Response(304, headers={"ETag": '"v1"'}))
    await make_due(engine, doc["id"])
    await ingestor.maintenance()
    assert await drain(ingestor) == {"unchanged": 1}
    assert route.call_count == 2
    sent = route.calls[-1].request
    assert sent.headers["If-None-Match"] == '"v1"'
    assert sent.headers["If-Modified-Since"] == LAST_MODIFIED
    assert sent.headers["Host"] == "help.example.com"
    assert counted.texts == ["Parking\n\nPark on level two."]
    assert await sync_state(engine, doc["id"]) == (True, "ready", ["Park on level two."])

    # Due, changed: re-indexed from the new page, and the new validators are sent next time.
    route.mock(
        return_value=httpx.Response(
            200, content=page("Park on level three."), headers={"Content-Type": "text/html", "ETag": '"v2"'}
        )
    )
    await make_due(engine, doc["id"])
    await ingestor.maintenance()
    assert await drain(ingestor) == {"ready": 1}
    assert route.calls[-1].request.headers["If-None-Match"] == '"v1"'
    assert counted.texts[1:] == ["Parking\n\nPark on level three."]
    assert await sync_state(engine, doc["id"]) == (True, "ready", ["Park on level three."])

    route.mock(return_value=httpx.Response(304))
    await make_due(engine, doc["id"])
    await ingestor.maintenance()
    assert await drain(ingestor) == {"unchanged": 1}
    assert route.calls[-1].request.headers["If-None-Match"] == '"v2"'
    assert len(counted.texts) == 2
