import hashlib

import pytest
from sqlalchemy import text

from tests.fixtures.pdfs import make_pdf
from tests.helpers import create_kb, create_text_doc


@pytest.fixture
async def kb(client, org):
    return await create_kb(client, org.headers)


async def test_text_document_is_accepted_pending(client, org, kb):
    doc = await create_text_doc(
        client, org.headers, kb["id"], content="# Hours\nWe open at 9.", content_type="markdown"
    )
    assert doc["status"] == "pending"
    assert doc["source_kind"] == "markdown"
    assert doc["kb_id"] == kb["id"]
    assert doc["content_hash"] == hashlib.sha256(b"# Hours\nWe open at 9.").hexdigest()
    assert doc["progress"] == {"done": 0, "total": 0}
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
    assert r.status_code == 200
    assert r.json()["status"] == "pending"


async def test_original_bytes_are_kept(client, org, kb, engine):
    doc = await create_text_doc(client, org.headers, kb["id"], content="Ünïcode text")
    async with engine.connect() as conn:
        original = (
            await conn.execute(text("SELECT original FROM documents WHERE id = :i"), {"i": doc["id"]})
        ).scalar_one()
    assert bytes(original) == "Ünïcode text".encode()


@pytest.mark.parametrize(
    ("name", "ctype", "payload", "kind"),
    [
        ("notes.md", "text/markdown", b"# Title\n\nBody text.", "markdown"),
        ("notes.txt", "text/plain", b"Plain body.", "text"),
        ("page.html", "text/html", b"<html><title>T</title><body><p>Hi</p></body></html>", "html"),
    ],
)
async def test_multipart_upload(client, org, kb, name, ctype, payload, kind):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": (name, payload, ctype)},
        data={"description": "from a file"},
        headers=org.headers,
    )
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["source_kind"] == kind
    assert body["file_name"] == name
    assert body["title"] == name.rsplit(".", 1)[0]
    assert body["description"] == "from a file"


async def test_pdf_upload(client, org, kb):
    pdf = make_pdf(["Lorem ipsum dolor sit amet, consectetur adipiscing elit."], title="A minimal document")
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("paper.pdf", pdf, "application/pdf")},
        data={"title": "A paper"},
        headers=org.headers,
    )
    assert r.status_code == 202
    assert r.json()["source_kind"] == "pdf"
    assert r.json()["title"] == "A paper"


async def test_unsupported_upload_is_415(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("report.odt", b"PK\x03\x04binary", "application/octet-stream")},
        headers=org.headers,
    )
    assert r.status_code == 415
    assert r.json()["error"] == "unsupported_media_type"
    assert (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()["documents"] == []


async def test_fake_pdf_is_415(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        files={"file": ("x.pdf", b"MZ not a pdf at all", "application/pdf")},
        headers=org.headers,
    )
    assert r.status_code == 415


@pytest.mark.parametrize(
    ("name", "ctype"),
    [("empty.txt", "text/plain"), ("empty.pdf", "application/pdf"), ("empty.md", "text/markdown")],
)
async def test_empty_upload_is_400_whatever_its_type(client, org, kb, name, ctype):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents", files={"file": (name, b"", ctype)}, headers=org.headers
    )
    assert (r.status_code, r.json()["detail"]) == (400, "the uploaded file is empty")
    assert (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()["documents"] == []


async def test_other_content_type_is_415(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        content=b"hello",
        headers={**org.headers, "Content-Type": "text/plain"},
    )
    assert r.status_code == 415


async def test_oversized_upload_is_413_and_stores_nothing(database_url, settings, org):
    from litestar.testing import AsyncTestClient

    from app.main import create_app
    from tests.conftest import fake_resolver

    small = settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"max_upload_bytes": 2048})}
    )
    async with AsyncTestClient(app=create_app(small, database_url=database_url, resolver=fake_resolver)) as c:
        kb = await create_kb(c, org.headers)
        r = await c.post(
            f"/api/knowledge/{kb['id']}/documents",
            files={"file": ("big.txt", b"a" * 200_000, "text/plain")},
            headers=org.headers,
        )
        assert r.status_code == 413
        assert r.json()["error"] == "payload_too_large"
        assert r.json()["detail"] == "the upload is larger than the limit of 2 KB"  # not "0 MB"
        r = await c.post(
            f"/api/knowledge/{kb['id']}/documents",
            json={"title": "t", "content": "b" * 200_000},
            headers=org.headers,
        )
        assert r.status_code == 413
        assert (await c.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()["documents"] == []


async def test_missing_content_is_422(client, org, kb):
    r = await client.post(f"/api/knowledge/{kb['id']}/documents", json={"title": "t"}, headers=org.headers)
    assert r.status_code == 422
    assert [f["field"] for f in r.json()["fields"]] == ["content"]


async def test_bad_content_type_value_is_422(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"title": "t", "content": "x", "content_type": "docx"},
        headers=org.headers,
    )
    assert r.status_code == 422
    assert r.json()["fields"][0]["field"] == "content_type"


async def test_non_json_document_body_is_400(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        content=b"{{",
        headers={**org.headers, "Content-Type": "application/json"},
    )
    assert r.status_code == 400
    assert r.json()["detail"] == "the request body is not valid JSON"


async def test_url_document_is_pending(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://docs.example.com/faq"},
        headers=org.headers,
    )
    assert r.status_code == 202
    body = r.json()
    assert body["source_kind"] == "url"
    assert body["source_url"] == "https://docs.example.com/faq"
    assert body["status"] == "pending"


async def test_github_blob_url_is_stored_as_raw(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://github.com/acme/docs/blob/main/README.md", "title": "Readme"},
        headers=org.headers,
    )
    assert r.status_code == 202
    assert r.json()["source_url"] == "https://raw.githubusercontent.com/acme/docs/main/README.md"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/admin",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data",
        "file:///etc/passwd",
        "http://example.com:8080/",
        # urllib cannot split it (an unbalanced IPv6 bracket): once a 500.
        "http://example[\x93",
    ],
)
async def test_blocked_url_is_400_and_stores_nothing(client, org, kb, url):
    r = await client.post(f"/api/knowledge/{kb['id']}/documents", json={"url": url}, headers=org.headers)
    assert r.status_code == 400
    assert r.json()["detail"].startswith("this URL cannot be fetched: ")
    assert (await client.get(f"/api/knowledge/{kb['id']}", headers=org.headers)).json()["documents"] == []


async def test_update_metadata_keeps_status(client, org, kb, engine):
    doc = await create_text_doc(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE documents SET status = 'ready' WHERE id = :i"), {"i": doc["id"]})
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"title": "Hours", "description": "d"},
        headers=org.headers,
    )
    assert r.status_code == 200
    assert (r.json()["title"], r.json()["description"], r.json()["status"]) == ("Hours", "d", "ready")


async def test_update_content_requeues(client, org, kb, engine):
    doc = await create_text_doc(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE documents SET status = 'ready', attempts = 1 WHERE id = :i"), {"i": doc["id"]}
        )
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"content": "We open at ten."},
        headers=org.headers,
    )
    assert r.status_code == 200
    assert r.json()["status"] == "pending"
    assert r.json()["attempts"] == 0
    assert r.json()["content_hash"] == hashlib.sha256(b"We open at ten.").hexdigest()


async def test_update_with_same_content_does_not_requeue(client, org, kb, engine, drain_queue):
    doc = await create_text_doc(client, org.headers, kb["id"], content="Same.")
    # Indexed for real, so a requeue would show: status, attempts, a new job, a version bump.
    assert await drain_queue() == {"ready": 1}
    path = f"/api/knowledge/{kb['id']}/documents/{doc['id']}"
    before = (await client.get(path, headers=org.headers)).json()
    version = await _content_version(engine, kb["id"])
    r = await client.put(path, json={"content": "Same."}, headers=org.headers)
    assert r.status_code == 200
    assert (r.json()["status"], r.json()["attempts"], r.json()["content_hash"]) == (
        "ready",
        1,
        hashlib.sha256(b"Same.").hexdigest(),
    )
    assert (await client.get(path, headers=org.headers)).json() == {
        **before,
        "updated_at": r.json()["updated_at"],
    }
    assert await drain_queue() == {}
    assert await _content_version(engine, kb["id"]) == version


async def _content_version(engine, kb_id):
    async with engine.connect() as conn:
        return (
            await conn.execute(
                text("SELECT content_version FROM knowledge_bases WHERE id = :k"), {"k": kb_id}
            )
        ).scalar_one()


async def test_update_unknown_field_is_422_and_changes_nothing(client, org, kb):
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"title": "x", "status": "ready"},
        headers=org.headers,
    )
    assert r.status_code == 422
    got = (await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)).json()
    assert (got["title"], got["status"]) == ("Opening hours", "pending")


async def test_delete_document(client, org, kb):
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.delete(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
    assert r.status_code == 204
    r = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}", headers=org.headers)
    assert r.status_code == 404


async def test_document_in_another_kb_of_same_org_is_404(client, org, kb):
    other = await create_kb(client, org.headers, "other")
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.get(f"/api/knowledge/{other['id']}/documents/{doc['id']}", headers=org.headers)
    assert r.status_code == 404


async def test_sync_only_for_url_documents(client, org, kb):
    # 409: the request is well formed; the document's kind refuses it (Schemathesis counted
    # the former 400 as a valid request refused).
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.post(f"/api/knowledge/{kb['id']}/documents/{doc['id']}/sync", headers=org.headers)
    assert (r.status_code, r.json()) == (
        409,
        {"error": "conflict", "detail": "only URL documents can be re-synced"},
    )


async def test_a_url_documents_content_comes_from_its_page(client, org, kb):
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents", json={"url": "https://example.com/faq"}, headers=org.headers
    )
    assert r.status_code == 202, r.text
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{r.json()['id']}",
        json={"content": "Other."},
        headers=org.headers,
    )
    assert (r.status_code, r.json()) == (
        409,
        {
            "error": "conflict",
            "detail": "the content of a URL document comes from its page; use .../sync instead",
        },
    )


async def test_a_content_type_needs_content(client, org, kb):
    # A rule of the body (422, and in the schema as if/then), no longer a 400 from the service.
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}", json={"content_type": "html"}, headers=org.headers
    )
    assert (r.status_code, r.json()) == (
        422,
        {
            "error": "validation_error",
            "detail": "invalid request body: body",
            "fields": [{"field": "body", "message": "content_type can only change together with content"}],
        },
    )


@pytest.mark.parametrize(
    ("value", "status"),
    [(True, 422), ("3600", 422), ([3600], 422), (3600.5, 422), (3600.0, 202), (3600, 202)],
)
async def test_sync_interval_is_a_json_integer(client, org, kb, value, status):
    # Litestar asks pydantic for lax validation, which read true as 1 and "3600" as 3600.
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents",
        json={"url": "https://example.com/faq", "sync_interval_s": value},
        headers=org.headers,
    )
    assert (value, r.status_code) == (value, status), r.text


@pytest.mark.parametrize(
    ("files", "data", "fields"),
    [
        (
            {"title": (None, "No file")},
            {},
            [{"field": "file", "message": "required"}],
        ),  # multipart all the same
        (
            {"file": ("a.txt", b"Text.", "text/plain")},
            {"colour": "red"},
            [{"field": "colour", "message": "not allowed"}],
        ),
        (
            {"file": ("a.txt", b"Text.", "text/plain")},
            {"title": " "},
            [{"field": "title", "message": "must not be empty or only whitespace"}],
        ),
    ],
)
async def test_a_multipart_upload_is_validated_like_json(client, org, kb, files, data, fields):
    # Schemathesis leaves negative multipart bodies out (tests/openapi/hooks.py): these are
    # the refusals it would otherwise check.
    r = await client.post(f"/api/knowledge/{kb['id']}/documents", files=files, data=data, headers=org.headers)
    assert (r.status_code, r.json()["fields"]) == (422, fields)
