"""Documents read again without their source: after an extractor upgrade (EXTRACTION_VERSION)
every document an older version read is re-read once from its stored copy; a URL document's
page is not fetched again, unless no copy of it is kept or an admin asks for a sync."""

from __future__ import annotations

import httpx
import pytest
import respx
from sqlalchemy import text

from app.ingestion.extract import EXTRACTION_VERSION
from app.ingestion.pipeline import Ingestor
from app.ingestion.worker import drain
from tests.conftest import PUBLIC_IP
from tests.helpers import create_kb, create_text_doc

PLAIN = "Opening hours\nWe are open Monday to Friday, 9 am to 5 pm.\n\nParking\nPark on level two."
# Without the header's charset these bytes read as "Zapraszamy do ｣odzi..." (a wrong guess).
PAGE = (
    "<html><head><title>Kawiarnia</title></head><body><main><h1>Kawiarnia</h1>"
    "<p>Zapraszamy do Łodzi. Źródło wody jest w ogrodzie.</p></main></body></html>"
).encode("iso-8859-2")
CONTENT_TYPE = "text/html; charset=ISO-8859-2"
CHUNK = "Zapraszamy do Łodzi. Źródło wody jest w ogrodzie."


@pytest.fixture
def ingestor(app, engine) -> Ingestor:
    state = app.state
    return Ingestor(engine, state.embedder, state.fetcher, state.settings.ingestion, "test-worker")


async def add_page(client, org, kb_id: str, respx_mock) -> tuple[dict, respx.Route]:
    route = respx_mock.get(f"https://{PUBLIC_IP}/cafe").mock(
        return_value=httpx.Response(200, content=PAGE, headers={"Content-Type": CONTENT_TYPE, "ETag": '"v1"'})
    )
    r = await client.post(
        f"/api/knowledge/{kb_id}/documents",
        json={"url": "https://help.example.com/cafe", "sync_interval_s": 3600},
        headers=org.headers,
    )
    assert r.status_code == 202, r.text
    return r.json(), route


async def state(engine, doc_id: str) -> dict:
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT status, error, reread, fetched_kind, fetched_charset, extraction_version,"
                    " (SELECT array_agg(c.text ORDER BY c.ordinal) FROM chunks c WHERE c.document_id = d.id)"
                    " AS chunks FROM documents d WHERE id = :d"
                ),
                {"d": doc_id},
            )
        ).one()
    return dict(row._mapping)


async def age(engine, *doc_ids: str) -> None:
    """As if an older extractor had read them."""
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE documents SET extraction_version = :v WHERE id = ANY(CAST(:d AS uuid[]))"),
            {"v": EXTRACTION_VERSION - 1, "d": list(doc_ids)},
        )


async def test_an_extractor_upgrade_rereads_every_document_once_from_its_stored_copy(
    client, org, engine, ingestor, respx_mock
):
    kb = await create_kb(client, org.headers)
    plain = await create_text_doc(client, org.headers, kb["id"], content=PLAIN)
    page, route = await add_page(client, org, kb["id"], respx_mock)
    assert await drain(ingestor) == {"ready": 2}
    read = await state(engine, page["id"])
    assert read == {
        "status": "ready",
        "error": None,
        "reread": False,
        "fetched_kind": "html",
        "fetched_charset": "iso-8859-2",
        "extraction_version": EXTRACTION_VERSION,
        "chunks": [CHUNK],
    }
    plain_chunks = (await state(engine, plain["id"]))["chunks"]
    assert plain_chunks == ["We are open Monday to Friday, 9 am to 5 pm.", "Park on level two."]

    await ingestor.maintenance()
    assert await drain(ingestor) == {}  # this version read them: nothing to do

    await age(engine, plain["id"], page["id"])
    await ingestor.maintenance()
    assert (await state(engine, page["id"]))["reread"] is True
    assert await drain(ingestor) == {"ready": 2}
    assert route.call_count == 1  # the page was read from its copy, with the charset it came with
    assert await state(engine, page["id"]) == read
    assert (await state(engine, plain["id"]))["chunks"] == plain_chunks

    await ingestor.maintenance()
    assert await drain(ingestor) == {}


async def test_a_reread_that_fails_keeps_the_chunks_says_why_and_is_not_tried_again(
    client, org, engine, ingestor
):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=PLAIN)
    assert await drain(ingestor) == {"ready": 1}
    chunks = (await state(engine, doc["id"]))["chunks"]
    async with engine.begin() as conn:  # a copy the new extractor cannot read
        await conn.execute(
            text("UPDATE documents SET original = :b WHERE id = :d"),
            {"b": b"\x89PNG\r\n\x1a\n\x00\x00", "d": doc["id"]},
        )
    await age(engine, doc["id"])
    await ingestor.maintenance()
    assert await drain(ingestor) == {"failed": 1}
    failed = await state(engine, doc["id"])
    assert failed["status"] == "failed"
    assert failed["error"].startswith("the file is binary, not text")
    assert failed["chunks"] == chunks  # still answering
    assert (failed["reread"], failed["extraction_version"]) == (False, EXTRACTION_VERSION)

    await ingestor.maintenance()
    assert await drain(ingestor) == {}


async def test_a_page_fetched_before_its_kind_was_kept_is_read_as_its_bytes_say(
    client, org, engine, ingestor, respx_mock
):
    kb = await create_kb(client, org.headers)
    page, route = await add_page(client, org, kb["id"], respx_mock)
    assert await drain(ingestor) == {"ready": 1}
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE documents SET fetched_kind = NULL, fetched_charset = NULL WHERE id = :d"),
            {"d": page["id"]},
        )
    await age(engine, page["id"])
    await ingestor.maintenance()
    assert await drain(ingestor) == {"ready": 1}
    assert route.call_count == 1
    got = await state(engine, page["id"])
    assert (got["fetched_kind"], got["fetched_charset"], got["reread"]) == ("html", None, False)
    assert got["extraction_version"] == EXTRACTION_VERSION
    assert got["chunks"] == ["Zapraszamy do ｣odzi. ｬr搞ｳo wody jest w ogrodzie."]  # its charset was not kept


async def test_a_page_without_a_stored_copy_is_fetched_whole(client, org, engine, ingestor, respx_mock):
    kb = await create_kb(client, org.headers)
    page, route = await add_page(client, org, kb["id"], respx_mock)
    assert await drain(ingestor) == {"ready": 1}
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE documents SET original = NULL WHERE id = :d"), {"d": page["id"]})
    await age(engine, page["id"])
    await ingestor.maintenance()
    assert await drain(ingestor) == {"ready": 1}
    assert route.call_count == 2
    sent = route.calls[-1].request
    assert "If-None-Match" not in sent.headers  # a 304 would leave the old chunks in place
    assert "If-Modified-Since" not in sent.headers
    got = await state(engine, page["id"])
    assert (got["chunks"], got["reread"], got["extraction_version"]) == ([CHUNK], False, EXTRACTION_VERSION)


async def test_a_failed_page_is_fetched_again_not_made_ready_from_its_last_good_copy(
    client, org, engine, ingestor, respx_mock
):
    kb = await create_kb(client, org.headers)
    page, route = await add_page(client, org, kb["id"], respx_mock)
    assert await drain(ingestor) == {"ready": 1}
    route.mock(return_value=httpx.Response(404))
    r = await client.post(f"/api/knowledge/{kb['id']}/documents/{page['id']}/sync", headers=org.headers)
    assert r.status_code == 202, r.text
    assert await drain(ingestor) == {"failed": 1}
    gone = await state(engine, page["id"])
    assert gone["chunks"] == [CHUNK]

    await age(engine, page["id"])
    await ingestor.maintenance()
    assert (await state(engine, page["id"]))["reread"] is False
    assert await drain(ingestor) == {"failed": 1}
    assert route.call_count == 3
    assert await state(engine, page["id"]) == gone  # still failed, for the same reason

    await ingestor.maintenance()
    assert await drain(ingestor) == {}


async def test_a_document_the_new_embedder_cannot_read_is_not_queued_again_and_again(
    client, org, engine, ingestor
):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=PLAIN)
    assert await drain(ingestor) == {"ready": 1}
    async with engine.begin() as conn:  # as if another embedder had read it, and its copy were unreadable now
        await conn.execute(
            text("UPDATE chunks SET embedding_model = 'old-model:1' WHERE document_id = :d"), {"d": doc["id"]}
        )
        await conn.execute(
            text("UPDATE documents SET embedding_model = 'old-model:1', original = :b WHERE id = :d"),
            {"b": b"\x89PNG\r\n\x1a\n\x00\x00", "d": doc["id"]},
        )
    model = ingestor.embedder.model_key
    await ingestor.maintenance(model)
    assert await drain(ingestor) == {"failed": 1}
    await ingestor.maintenance(model)
    assert await drain(ingestor) == {}
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT status, embedding_model FROM documents WHERE id = :d"), {"d": doc["id"]}
            )
        ).one()
    assert tuple(row) == ("failed", model)


async def test_a_sync_asked_for_while_a_reread_waits_fetches_the_page(
    client, org, engine, ingestor, respx_mock
):
    kb = await create_kb(client, org.headers)
    page, route = await add_page(client, org, kb["id"], respx_mock)
    assert await drain(ingestor) == {"ready": 1}
    await age(engine, page["id"])
    await ingestor.maintenance()
    assert (await state(engine, page["id"]))["reread"] is True

    route.mock(
        return_value=httpx.Response(
            200,
            content=PAGE.replace(b"ogrodzie", b"kuchni"),
            headers={"Content-Type": CONTENT_TYPE, "ETag": '"v2"'},
        )
    )
    r = await client.post(f"/api/knowledge/{kb['id']}/documents/{page['id']}/sync", headers=org.headers)
    assert r.status_code == 202, r.text
    assert (await state(engine, page["id"]))["reread"] is False
    assert await drain(ingestor) == {"ready": 1}
    assert route.call_count == 2
    assert route.calls[-1].request.headers["If-None-Match"] == '"v1"'
    got = await state(engine, page["id"])
    assert got["chunks"] == [CHUNK.replace("ogrodzie", "kuchni")]
    assert got["extraction_version"] == EXTRACTION_VERSION


async def test_a_reread_keeps_the_page_sync_when_it_was_due(client, org, engine, ingestor, respx_mock):
    # The stored copy is read again and nothing is fetched: the page's next sync stays put.
    kb = await create_kb(client, org.headers)
    page, route = await add_page(client, org, kb["id"], respx_mock)
    assert await drain(ingestor) == {"ready": 1}
    due = "SELECT next_sync_at FROM documents WHERE id = :d"
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE documents SET next_sync_at = now() + interval '10 minutes' WHERE id = :d"),
            {"d": page["id"]},
        )
        planned = (await conn.execute(text(due), {"d": page["id"]})).scalar_one()

    await age(engine, page["id"])
    await ingestor.maintenance()
    assert (await state(engine, page["id"]))["reread"] is True
    assert await drain(ingestor) == {"ready": 1}

    async with engine.connect() as conn:
        assert (await conn.execute(text(due), {"d": page["id"]})).scalar_one() == planned
    assert route.call_count == 1
