"""Documents under concurrency: quotas checked against requests in flight together, and an
edit that re-queues a document some worker is still processing.

The test client hands each request to a portal thread one at a time, so ``asyncio.gather``
on it never overlaps two requests; the quota tests run the app in the test's own event loop
behind an ASGI transport instead.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
from litestar import Litestar
from sqlalchemy import text

from app.main import create_app
from tests.conftest import fake_resolver, make_ingestor
from tests.helpers import create_kb, create_text_doc, served


def _app(database_url: str, settings: Any, **limits: Any) -> Litestar:
    limited = settings.model_copy(update={"limits": settings.limits.model_copy(update=limits)})
    return create_app(limited, database_url=database_url, resolver=fake_resolver, run_workers=False)


async def _stored(engine, org_id) -> tuple[int, int]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT count(*), coalesce(sum(size_bytes), 0) FROM documents WHERE org_id = :o"),
                {"o": org_id},
            )
        ).one()
    return int(row[0]), int(row[1])


async def test_concurrent_uploads_stop_at_documents_per_kb(database_url, settings, org, engine):
    async with served(_app(database_url, settings, documents_per_kb=3)) as client:
        kb = await create_kb(client, org.headers)
        answers = await asyncio.gather(
            *(
                client.post(
                    f"/api/knowledge/{kb['id']}/documents",
                    json={"title": f"t{i}", "content": f"document {i}"},
                    headers=org.headers,
                )
                for i in range(12)
            )
        )
    assert sorted(a.status_code for a in answers) == [202] * 3 + [403] * 9
    assert {a.text for a in answers if a.status_code == 403} == {
        '{"error":"quota_exceeded","detail":"this knowledge base holds the maximum of 3 documents"}'
    }
    assert (await _stored(engine, org.id))[0] == 3


async def test_concurrent_uploads_stop_at_the_storage_quota(database_url, settings, org, engine):
    """Across KBs too: the quota is the organisation's."""
    async with served(_app(database_url, settings, org_storage_bytes=1024**2)) as client:
        kbs = [await create_kb(client, org.headers, f"kb{i}") for i in range(2)]
        answers = await asyncio.gather(
            *(
                client.post(
                    f"/api/knowledge/{kbs[i % 2]['id']}/documents",
                    json={"title": f"t{i}", "content": str(i % 10) * 300_000},
                    headers=org.headers,
                )
                for i in range(10)
            )
        )
    assert sorted(a.status_code for a in answers) == [202] * 3 + [403] * 7
    assert {a.json()["detail"] for a in answers if a.status_code == 403} == {
        "the organisation's storage quota of 1 MB would be exceeded"
    }
    assert await _stored(engine, org.id) == (3, 900_000)


async def test_concurrent_content_growth_stops_at_the_storage_quota(database_url, settings, org, engine):
    async with served(_app(database_url, settings, org_storage_bytes=4096)) as client:
        kb = await create_kb(client, org.headers)
        # Three different contents: the same one thrice would be refused as duplicates.
        docs = [await create_text_doc(client, org.headers, kb["id"], content=c * 1000) for c in "abc"]
        # Each edit alone fits (3000 + 1000 <= 4096); any two together do not.
        answers = await asyncio.gather(
            *(
                client.put(
                    f"/api/knowledge/{kb['id']}/documents/{d['id']}",
                    json={"content": "b" * 2000},
                    headers=org.headers,
                )
                for d in docs
            )
        )
    assert sorted(a.status_code for a in answers) == [200, 403, 403]
    assert {a.json()["error"] for a in answers if a.status_code == 403} == {"quota_exceeded"}
    assert await _stored(engine, org.id) == (3, 4000)


async def test_concurrent_identical_uploads_store_one_document(database_url, settings, org, engine):
    """The lookup for a duplicate and the insert are one step under the KB's lock: without it,
    copies sent together all found none and all got in."""
    async with served(_app(database_url, settings)) as client:
        kb = await create_kb(client, org.headers)
        answers = await asyncio.gather(
            *(
                client.post(
                    f"/api/knowledge/{kb['id']}/documents",
                    json={"title": f"t{i}", "content": "We open at nine."},
                    headers=org.headers,
                )
                for i in range(8)
            )
        )
    assert sorted(a.status_code for a in answers) == [202] + [409] * 7
    [kept] = [a.json() for a in answers if a.status_code == 202]
    assert {a.json()["existing_document"]["id"] for a in answers if a.status_code == 409} == {kept["id"]}
    assert (await _stored(engine, org.id))[0] == 1


async def _chunk_texts(engine, doc_id) -> str:
    async with engine.connect() as conn:
        rows = await conn.execute(text("SELECT text FROM chunks WHERE document_id = :d"), {"d": doc_id})
        return " ".join(r.text for r in rows)


OLD = "The owl hunts at midnight in the old barn."
NEW = "The heron fishes at dawn by the river."


async def test_edit_while_processing_is_taken_at_once_and_old_worker_is_fenced(client, app, org, engine):
    """The edit used to leave the old worker's lease in place: nobody could take the new
    version until that lease expired (two minutes)."""
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=OLD)
    old = make_ingestor(app, engine, "old-worker")
    [stale] = await old.claim(1)
    path = f"/api/knowledge/{kb['id']}/documents/{doc['id']}"
    r = await client.put(path, json={"content": NEW}, headers=org.headers)
    assert r.status_code == 200
    assert r.json()["status"] == "pending"

    new = make_ingestor(app, engine, "new-worker")
    [fresh] = await new.claim(1)
    assert (fresh.id, fresh.original) == (stale.id, NEW.encode())
    # The old worker finishes the old version late: every write it tries is refused.
    assert (await old.process(stale)).status == "lost"
    assert (await new.process(fresh)).status == "ready"
    got = (await client.get(path, headers=org.headers)).json()
    assert (got["status"], got["content_hash"]) == ("ready", hashlib.sha256(NEW.encode()).hexdigest())
    chunks = await _chunk_texts(engine, doc["id"])
    assert "heron" in chunks
    assert "owl" not in chunks


@pytest.mark.parametrize("old_content", [OLD, "<script>no text at all</script>"], ids=["ready", "failed"])
async def test_old_worker_finishing_before_anyone_retakes_the_edit_writes_nothing(
    client, app, org, engine, drain_queue, old_content
):
    """Before the fix the old worker still held the lease after the edit: a failure of the
    old version marked the edited document failed, and the new content was never indexed."""
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=old_content, content_type="html")
    old = make_ingestor(app, engine, "old-worker")
    [stale] = await old.claim(1)
    path = f"/api/knowledge/{kb['id']}/documents/{doc['id']}"
    r = await client.put(path, json={"content": NEW, "content_type": "text"}, headers=org.headers)
    assert r.status_code == 200

    await old.process(stale)
    got = (await client.get(path, headers=org.headers)).json()
    assert (got["status"], got["error"], got["chunk_count"]) == ("pending", None, 0)
    assert await _chunk_texts(engine, doc["id"]) == ""
    assert await drain_queue() == {"ready": 1}
    assert "heron" in await _chunk_texts(engine, doc["id"])
