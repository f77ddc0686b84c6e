"""Ingestion end to end against the real database: queue, extraction, chunking,
embedding (offline lexical, and OpenAI through respx), the atomic swap and leases."""

import json
from collections.abc import Callable

import httpx
import pytest
import respx
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.ingestion.worker import drain
from app.main import create_app
from tests.conftest import PUBLIC_IP, SHARED, fake_resolver, make_ingestor, openai_client_mocked
from tests.fixtures.pdfs import paper_pdf, password_protected_pdf
from tests.helpers import create_kb, create_text_doc, embeddings_reply

EVAL_PDFS = SHARED / "eval" / "pdfs"

MARKDOWN = """# Acme Support

## Opening hours
We are open Monday to Friday from nine to five.

## Refunds
Refunds are paid within 14 days to the original card.
"""


async def _chunks(engine, doc_id):
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT ordinal, text, section, page, embedding_model, embedding_dim FROM chunks WHERE document_id = :d ORDER BY ordinal"
            ),
            {"d": doc_id},
        )
        return [r._asdict() for r in rows]


async def _doc(client, org, kb_id, doc_id):
    r = await client.get(f"/api/knowledge/{kb_id}/documents/{doc_id}", headers=org.headers)
    assert r.status_code == 200
    return r.json()


async def test_markdown_document_becomes_ready_with_sections(client, app, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=MARKDOWN, content_type="markdown")
    assert await drain_queue() == {"ready": 1}
    got = await _doc(client, org, kb["id"], doc["id"])
    assert got["status"] == "ready"
    assert got["error"] is None
    assert got["chunk_count"] == 2
    assert got["progress"] == {"done": 2, "total": 2}
    assert got["indexed_at"] is not None
    chunks = await _chunks(engine, doc["id"])
    assert [c["section"] for c in chunks] == ["Opening hours", "Refunds"]
    assert chunks[1]["text"] == "Refunds are paid within 14 days to the original card."
    assert {c["embedding_model"] for c in chunks} == {"lexical-v1:512"}
    assert {c["embedding_dim"] for c in chunks} == {512}
    kb_after = (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()
    assert kb_after["chunk_count"] == 2


async def test_full_text_vector_includes_title_and_section(client, app, org, drain_queue, engine):
    # "handbook" is only in the title, "hour" only in the first section's heading, "card" only
    # in the second chunk's body: each word proves one source of the chunk's terms.
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        title="Brightwater Handbook",
        content=MARKDOWN,
        content_type="markdown",
    )
    assert await drain_queue() == {"ready": 1}
    async with engine.connect() as conn:
        matches = (
            await conn.execute(
                text(
                    "SELECT section, tsv @@ to_tsquery('english', 'handbook:A'), tsv @@ to_tsquery('english', 'hour:A'),"
                    " tsv @@ to_tsquery('english', 'card') FROM chunks WHERE document_id = :d ORDER BY ordinal"
                ),
                {"d": doc["id"]},
            )
        ).all()
        # BM25 on the query path reads chunk_terms (migration 0004), filled from tsv by trigger.
        terms = (
            await conn.execute(
                text(
                    "SELECT c.section, array_agg(t.term ORDER BY t.term) FROM chunks c"
                    " JOIN chunk_terms t ON t.kb_id = c.kb_id AND t.chunk_id = c.id"
                    " WHERE c.document_id = :d AND t.term IN ('handbook', 'hour', 'card')"
                    " GROUP BY c.ordinal, c.section ORDER BY c.ordinal"
                ),
                {"d": doc["id"]},
            )
        ).all()
    # Title and section carry weight A, above the body.
    assert [tuple(row) for row in matches] == [
        ("Opening hours", True, True, False),
        ("Refunds", True, False, True),
    ]
    assert [tuple(row) for row in terms] == [
        ("Opening hours", ["handbook", "hour"]),
        ("Refunds", ["card", "handbook"]),
    ]


async def test_empty_html_fails_with_reason(client, app, org, drain_queue):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        content="<html><body><script>x()</script></body></html>",
        content_type="html",
    )
    assert await drain_queue() == {"failed": 1}
    got = await _doc(client, org, kb["id"], doc["id"])
    assert got["status"] == "failed"
    assert got["error"] == "no text found"


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        ("\u0301" * 50, "text"),  # combining accents on nothing
        (". , ; ! ? - " * 30, "text"),
        ("\u202e\u202d" * 30, "text"),  # bidirectional controls
        ("\U0001f600 " * 30, "text"),  # emoji
        ("\ue000\ue001" * 30, "text"),  # private-use glyphs (an icon font's)
        ("# \u2014\n\n* \u2022 \u2022\n* \u00b7\n", "markdown"),
    ],
    ids=["combining-marks", "punctuation", "bidi-controls", "emoji", "private-use", "markdown-symbols"],
)
async def test_text_without_a_letter_or_digit_is_never_ready(
    client, app, org, drain_queue, engine, content, content_type
):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=content, content_type=content_type)
    assert await drain_queue() == {"failed": 1}
    got = await _doc(client, org, kb["id"], doc["id"])
    assert (got["status"], got["error"], got["chunk_count"]) == (
        "failed",
        "no text found: the document holds no letters or digits, only marks, symbols or invisible characters",
        0,
    )


async def test_a_document_of_numbers_alone_is_read(client, app, org, drain_queue):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="0161 496 0000\n\n1,650")
    assert await drain_queue() == {"ready": 1}
    assert (await _doc(client, org, kb["id"], doc["id"]))["status"] == "ready"


async def test_failed_new_version_keeps_old_chunks(client, app, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=MARKDOWN, content_type="markdown")
    await drain_queue()
    before = await _chunks(engine, doc["id"])
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"content": "<p style='display:none'>hidden</p>", "content_type": "html"},
        headers=org.headers,
    )
    assert r.json()["status"] == "pending"
    # While the new version waits, the old chunks still answer.
    assert await _chunks(engine, doc["id"]) == before
    assert await drain_queue() == {"failed": 1}
    got = await _doc(client, org, kb["id"], doc["id"])
    assert (got["status"], got["error"], got["chunk_count"]) == ("failed", "no text found", 2)
    assert await _chunks(engine, doc["id"]) == before


async def test_edit_swaps_chunks_and_bumps_version(client, app, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="Old text about parking.")
    await drain_queue()
    v1 = (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()
    await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"content": "New text about bicycles."},
        headers=org.headers,
    )
    assert await drain_queue() == {"ready": 1}
    chunks = await _chunks(engine, doc["id"])
    assert [c["text"] for c in chunks] == ["New text about bicycles."]
    async with engine.connect() as conn:
        version = (
            await conn.execute(
                text("SELECT content_version FROM knowledge_bases WHERE id = :k"), {"k": kb["id"]}
            )
        ).scalar_one()
    assert version == 2
    assert v1["chunk_count"] == 1


@pytest.mark.parametrize(
    "load",
    [
        pytest.param(lambda: paper_pdf(14), id="generated"),
        pytest.param(
            (EVAL_PDFS / "pdfjs__tracemonkey.pdf").read_bytes,
            id="pdfjs__tracemonkey.pdf",
            marks=pytest.mark.shared_data("eval/pdfs/pdfjs__tracemonkey.pdf"),
        ),
    ],
)
async def test_pdf_upload_is_indexed_with_pages(
    load: Callable[[], bytes], client, app, org, drain_queue, engine
):
    kb = await create_kb(client, org.headers)
    pdf = load()
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("tm.pdf", pdf, "application/pdf")},
        headers=org.headers,
    )
    doc = r.json()
    assert await drain_queue() == {"ready": 1}
    got = await _doc(client, org, kb["id"], doc["id"])
    assert got["pages_total"] == 14
    assert got["pages_skipped"] == 0
    pages = {c["page"] for c in await _chunks(engine, doc["id"])}
    assert pages == set(range(1, 15))


@pytest.mark.parametrize(
    "load",
    [
        pytest.param(password_protected_pdf, id="generated"),
        pytest.param(
            (EVAL_PDFS / "samplefiles__libreoffice-writer-password.pdf").read_bytes,
            id="samplefiles__libreoffice-writer-password.pdf",
            marks=pytest.mark.shared_data("eval/pdfs/samplefiles__libreoffice-writer-password.pdf"),
        ),
    ],
)
async def test_encrypted_pdf_fails_and_worker_goes_on(
    load: Callable[[], bytes], client, app, org, drain_queue
):
    kb = await create_kb(client, org.headers)
    enc = load()
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("locked.pdf", enc, "application/pdf")},
        headers=org.headers,
    )
    bad = r.json()
    good = await create_text_doc(client, org.headers, kb["id"], content="Still indexed afterwards.")
    assert await drain_queue() == {"failed": 1, "ready": 1}
    assert (await _doc(client, org, kb["id"], bad["id"]))[
        "error"
    ] == "the PDF is encrypted with a password; upload an unprotected copy"
    assert (await _doc(client, org, kb["id"], good["id"]))["status"] == "ready"


async def test_url_document_is_fetched_from_checked_address(
    client, app, org, drain_queue, engine, respx_mock
):
    page = b"<html><head><title>Parking guide</title></head><body><main><p>Park on level two.</p></main></body></html>"
    route = respx_mock.get(f"https://{PUBLIC_IP}/parking").mock(
        return_value=httpx.Response(
            200, content=page, headers={"Content-Type": "text/html; charset=utf-8", "ETag": '"v1"'}
        )
    )
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://help.example.com/parking"},
        headers=org.headers,
    )
    doc = r.json()
    assert await drain_queue() == {"ready": 1}
    assert route.call_count == 1
    sent = route.calls[0].request
    assert sent.headers["Host"] == "help.example.com"
    got = await _doc(client, org, kb["id"], doc["id"])
    assert got["title"] == "Parking guide"
    assert [c["text"] for c in await _chunks(engine, doc["id"])] == ["Park on level two."]

    # Re-sync: a 304 to the conditional request changes nothing and embeds nothing.
    route.mock(return_value=httpx.Response(304))
    r = await client.post(f"/api/knowledge/{kb['id']}/documents/{doc['id']}/sync", headers=org.headers)
    assert r.status_code == 202
    assert await drain_queue() == {"unchanged": 1}
    assert route.calls[-1].request.headers["If-None-Match"] == '"v1"'
    assert (await _doc(client, org, kb["id"], doc["id"]))["status"] == "ready"


async def test_url_unchanged_content_hash_costs_nothing(client, app, org, drain_queue, engine, respx_mock):
    page = b"Plain page text about lockers."
    route = respx_mock.get(f"https://{PUBLIC_IP}/lockers").mock(
        return_value=httpx.Response(200, content=page, headers={"Content-Type": "text/plain"})
    )
    kb = await create_kb(client, org.headers)
    doc = (
        await client.post(
            f"/api/knowledge/{kb['id']}/documents",
            json={"url": "https://help.example.com/lockers", "title": "Lockers"},
            headers=org.headers,
        )
    ).json()
    assert await drain_queue() == {"ready": 1}
    before = await _chunk_ids_and_version(engine, doc["id"], kb["id"])
    assert len(before[0]) == 1
    r = await client.post(f"/api/knowledge/{kb['id']}/documents/{doc['id']}/sync", headers=org.headers)
    assert r.status_code == 202
    assert await drain_queue() == {"unchanged": 1}
    assert route.call_count == 2
    # Same rows, not a delete and re-insert (which keeps ordinals but not ids), and nothing
    # tells the query path's caches that the knowledge base changed.
    assert await _chunk_ids_and_version(engine, doc["id"], kb["id"]) == before


async def _chunk_ids_and_version(engine, doc_id, kb_id):
    async with engine.connect() as conn:
        ids = (
            await conn.execute(
                text("SELECT id FROM chunks WHERE document_id = :d ORDER BY ordinal"), {"d": doc_id}
            )
        ).scalars()
        version = (
            await conn.execute(
                text("SELECT content_version FROM knowledge_bases WHERE id = :k"), {"k": kb_id}
            )
        ).scalar_one()
        return list(ids), version


def _openai_settings(settings):
    from pydantic import SecretStr

    return settings.model_copy(
        update={
            "openai_api_key": SecretStr("sk-test"),
            "openai_base_url": "https://api.openai.test/v1",
            # auto: a key means OpenAI embeddings.
            "embedding": settings.embedding.model_copy(update={"provider": "auto"}),
        }
    )


async def test_reindex_of_unchanged_content_makes_no_embedding_call(database_url, settings, org, engine):
    app = create_app(
        _openai_settings(settings), database_url=database_url, resolver=fake_resolver, run_workers=False
    )
    with respx.mock(assert_all_called=False) as mock, openai_client_mocked(mock):
        route = mock.post("https://api.openai.test/v1/embeddings").mock(side_effect=embeddings_reply)
        async with AsyncTestClient(app=app) as c:
            kb = await create_kb(c, org.headers)
            doc = await create_text_doc(
                c, org.headers, kb["id"], title="Acme Support", content=MARKDOWN, content_type="markdown"
            )
            assert await drain(make_ingestor(app, engine)) == {"ready": 1}
            assert route.call_count == 1
            sent = json.loads(route.calls[0].request.content)
            assert sent["model"] == "text-embedding-3-small"
            assert sent["input"] == [
                "Acme Support\nOpening hours\n\nWe are open Monday to Friday from nine to five.",
                "Acme Support\nRefunds\n\nRefunds are paid within 14 days to the original card.",
            ]
            # Re-index the same content (e.g. after a lost lease or a settings change).
            async with engine.begin() as conn:
                await conn.execute(
                    text("UPDATE documents SET status = 'pending' WHERE id = :d"), {"d": doc["id"]}
                )
            assert await drain(make_ingestor(app, engine)) == {"ready": 1}
            assert route.call_count == 1
            chunks = await _chunks(engine, doc["id"])
            assert {c["embedding_model"] for c in chunks} == {"openai:text-embedding-3-small:1536"}


async def test_provider_outage_retries_then_fails_keeping_nothing_half_written(
    database_url, settings, org, engine
):
    app = create_app(
        _openai_settings(settings), database_url=database_url, resolver=fake_resolver, run_workers=False
    )
    with respx.mock(assert_all_called=False) as mock, openai_client_mocked(mock):
        route = mock.post("https://api.openai.test/v1/embeddings").mock(
            return_value=httpx.Response(500, json={"error": {"message": "boom"}})
        )
        async with AsyncTestClient(app=app) as c:
            app.state.embedder._sleep = _no_sleep  # the embedder's backoff, not the queue's
            kb = await create_kb(c, org.headers)
            doc = await create_text_doc(c, org.headers, kb["id"], content="Some text.")
            for attempt in range(1, 4):
                async with engine.begin() as conn:  # skip the queue's backoff delay
                    await conn.execute(
                        text("UPDATE documents SET lease_expires_at = NULL WHERE id = :d"), {"d": doc["id"]}
                    )
                expected = "retry" if attempt < 3 else "failed"
                assert await drain(make_ingestor(app, engine)) == {expected: 1}
            got = (
                await c.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
            ).json()
            assert got["status"] == "failed"
            assert got["attempts"] == 3
            assert got["error"].startswith("embedding failed: ")
            assert got["error"].endswith("(gave up after 3 attempts)")
            assert await _chunks(engine, doc["id"]) == []
            assert route.call_count == 15  # 3 attempts x 5 tries inside the embedder
            # Every try sent the one chunk, prefixed with the document's title.
            assert [json.loads(call.request.content) for call in route.calls] == [
                {
                    "model": "text-embedding-3-small",
                    "input": ["Opening hours\n\nSome text."],
                    "encoding_format": "base64",
                    "dimensions": 1536,
                }
            ] * 15


async def _no_sleep(_seconds):
    return None


async def test_expired_lease_is_taken_over_and_stale_worker_is_fenced(client, app, org, drain_queue, engine):
    """A worker that dies mid-document (its lease expires) does not stop the document,
    and if it comes back it cannot write: no duplicate chunks, exact count."""

    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content=MARKDOWN, content_type="markdown")
    dead = make_ingestor(app, engine, "dead-worker")
    [claimed] = await dead.claim(1)
    # While the lease is live, nobody else takes the document.
    assert await make_ingestor(app, engine).claim(1) == []
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE documents SET lease_expires_at = now() - interval '1 second' WHERE id = :d"),
            {"d": doc["id"]},
        )
    assert await drain_queue() == {"ready": 1}
    # The stale worker finishes late: its writes are refused.
    assert (await dead.process(claimed)).status == "lost"
    got = await _doc(client, org, kb["id"], doc["id"])
    assert (got["status"], got["chunk_count"], got["attempts"]) == ("ready", 2, 2)
    assert len(await _chunks(engine, doc["id"])) == 2


async def test_worker_death_beyond_attempt_limit_fails_document(client, app, org, drain_queue, engine):
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE documents SET status = 'processing', attempts = 3, lease_owner = 'gone', lease_expires_at = now() - interval '1 s' WHERE id = :d"
            ),
            {"d": doc["id"]},
        )
    assert await drain_queue() == {}
    await make_ingestor(app, engine).maintenance()
    got = await _doc(client, org, kb["id"], doc["id"])
    assert got["status"] == "failed"
    assert got["error"] == "processing was interrupted 3 times; giving up (re-upload or edit to retry)"


@pytest.mark.shared_data("eval/squad-dev/docs")
async def test_squad_articles_every_gold_paragraph_is_findable(client, app, org, drain_queue, engine):
    import re

    docs_dir = SHARED / "eval" / "squad-dev" / "docs"
    kb = await create_kb(client, org.headers, "SQuAD")
    ids = {}
    for path in sorted(docs_dir.glob("*.md")):
        r = await client.post(
            f"/api/knowledge/{kb['id']}/documents",
            files={"file": (path.name, path.read_bytes(), "text/markdown")},
            headers=org.headers,
        )
        ids[path.name] = r.json()["id"]
    assert await drain_queue() == {"ready": 20}
    from app.answering.extractive import split_sentences
    from app.ingestion.chunking import get_encoding

    encoding = get_encoding()

    def norm(s: str) -> str:
        # Extraction drops zero-width characters (they only confuse speech and search).
        return re.sub(r"\s+", " ", re.sub("[\u200b-\u200d\ufeff]", "", s)).strip()

    async with engine.connect() as conn:
        rows = (await conn.execute(text("SELECT document_id::text, text FROM chunks"))).all()
    by_doc: dict[str, str] = {}
    for doc_id, chunk_text in rows:
        by_doc[doc_id] = by_doc.get(doc_id, "") + "\n\x00" + norm(chunk_text)
    missing = []
    total = split = 0
    for path in sorted(docs_dir.glob("*.md")):
        paragraphs = [p for p in path.read_text().split("\n\n")[1:] if p.strip()]
        indexed = by_doc[ids[path.name]]
        for i, para in enumerate(paragraphs):
            total += 1
            if len(encoding.encode(para)) <= 500:
                # A paragraph that fits in one chunk is found whole, in one chunk.
                if norm(para) not in indexed:
                    missing.append((path.name, i))
            else:
                # A longer one is split at sentences: every sentence is in some chunk.
                split += 1
                missing += [(path.name, i, s) for s in split_sentences(para) if norm(s) not in indexed]
    assert total == 710
    assert split == 8
    assert missing == []


async def test_a_fetched_page_over_the_storage_quota_fails_the_document(
    database_url, settings, org, engine, respx_mock
):
    """A URL document's size is known only once fetched: the worker checks the quota then,
    as the API does for an upload. A page that fits is indexed; one that does not fails with
    the reason and stores nothing."""
    limited = settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"org_storage_bytes": 4096})}
    )
    app = create_app(limited, database_url=database_url, resolver=fake_resolver, run_workers=False)
    small = (
        b"<html><head><title>Parking</title></head><body><main><p>Park on level two.</p></main></body></html>"
    )
    large = b"<html><body><main><p>" + b"Lockers are on every floor. " * 100 + b"</p></main></body></html>"
    respx_mock.get(f"https://{PUBLIC_IP}/parking").mock(
        return_value=httpx.Response(200, content=small, headers={"Content-Type": "text/html"})
    )
    respx_mock.get(f"https://{PUBLIC_IP}/lockers").mock(
        return_value=httpx.Response(200, content=large, headers={"Content-Type": "text/html"})
    )
    async with AsyncTestClient(app=app) as client:
        kb = await create_kb(client, org.headers)
        await create_text_doc(client, org.headers, kb["id"], content="x" * 2000)
        for page in ("parking", "lockers"):
            r = await client.post(
                f"/api/knowledge/{kb['id']}/documents",
                json={"url": f"https://help.example.com/{page}", "title": page},
                headers=org.headers,
            )
            assert r.status_code == 202, r.text  # unknown size: accepted at 0 bytes
        assert await drain(make_ingestor(app, engine)) == {"ready": 2, "failed": 1}
        docs = {
            d["title"]: d
            for d in (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()["documents"]
        }
    lockers = docs["lockers"]
    assert (docs["parking"]["status"], lockers["status"], lockers["chunk_count"]) == ("ready", "failed", 0)
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT error, size_bytes, original IS NULL AS empty FROM documents WHERE id = :d"),
                {"d": lockers["id"]},
            )
        ).one()
    assert (row.error, row.size_bytes, row.empty) == (
        f"the page ({len(large):,} bytes) would exceed the organisation's storage quota of 4,096 bytes",
        0,
        True,
    )


async def test_organisations_take_turns_in_the_queue(client, app, org, other_org, engine):
    """One organisation's backlog does not hold back another's upload: each claim goes to the
    organisation with the fewest documents in work and waiting ahead, oldest first."""
    kb = await create_kb(client, org.headers)
    backlog = [await create_text_doc(client, org.headers, kb["id"], content=f"Page {i}.") for i in range(4)]
    other_kb = await create_kb(client, other_org.headers)
    late = await create_text_doc(client, other_org.headers, other_kb["id"])
    worker = make_ingestor(app, engine)

    one_by_one = [str(d.id) for _ in range(2) for d in await worker.claim(1)]
    rest = {str(d.id) for d in await worker.claim(5)}

    ids = [str(d["id"]) for d in backlog]
    assert (one_by_one, rest) == ([ids[0], str(late["id"])], set(ids[1:]))


async def test_rereads_wait_behind_new_work(client, app, org, other_org, engine):
    kb = await create_kb(client, org.headers)
    old = await create_text_doc(client, org.headers, kb["id"])
    async with engine.begin() as conn:  # as an extractor upgrade queues it (STALE_SQL)
        await conn.execute(text("UPDATE documents SET reread = true WHERE id = :d"), {"d": old["id"]})
    other_kb = await create_kb(client, other_org.headers)
    new = await create_text_doc(client, other_org.headers, other_kb["id"])
    worker = make_ingestor(app, engine)

    claimed = [str(d.id) for d in await worker.claim(1)] + [str(d.id) for d in await worker.claim(1)]

    assert claimed == [str(new["id"]), str(old["id"])]


async def test_a_claim_skips_a_queue_head_that_other_claims_hold(client, app, org, engine):
    kb = await create_kb(client, org.headers)
    docs = [await create_text_doc(client, org.headers, kb["id"], content=f"Page {i}.") for i in range(34)]
    async with engine.connect() as other:
        # Other claims hold the first 33 at this instant: the turns' whole head.
        await other.execute(
            text("SELECT id FROM documents ORDER BY created_at LIMIT 33 FOR UPDATE"),
        )
        claimed = await make_ingestor(app, engine).claim(1)
        await other.rollback()

    assert [str(d.id) for d in claimed] == [str(docs[33]["id"])]


async def test_a_claim_takes_what_it_can_from_the_head_then_the_rest(client, app, org, engine):
    kb = await create_kb(client, org.headers)
    docs = [await create_text_doc(client, org.headers, kb["id"], content=f"Page {i}.") for i in range(35)]
    async with engine.connect() as other:
        # The head of a claim of two is 34 documents; other claims hold 33 of them.
        await other.execute(
            text("SELECT id FROM documents ORDER BY created_at LIMIT 33 FOR UPDATE"),
        )
        claimed = await make_ingestor(app, engine).claim(2)
        await other.rollback()

    assert sorted(str(d.id) for d in claimed) == sorted([str(docs[33]["id"]), str(docs[34]["id"])])
