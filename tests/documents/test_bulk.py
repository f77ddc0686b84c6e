"""The bulk document API: many files in one request with a result each, documents found
again by their path, and many deleted at once."""

import hashlib

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.main import create_app
from tests.conftest import fake_resolver, make_org
from tests.helpers import CountingEmbedder, create_kb, create_text_doc


@pytest.fixture
async def kb(client, org):
    return await create_kb(client, org.headers)


def bulk_url(kb_id: str, query: str = "") -> str:
    return f"/api/knowledge/{kb_id}/documents/bulk{query}"


def parts(*files: tuple[str, bytes]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("file", (name, data, "application/octet-stream")) for name, data in files]


async def stored(engine, kb_id: str) -> dict[str, tuple[str, str]]:
    """source_path → (status, content hash) of the KB's documents."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT source_path, status, content_hash FROM documents WHERE kb_id = :kb"), {"kb": kb_id}
        )
        return {r.source_path: (r.status, r.content_hash) for r in rows}


async def test_mixed_files_each_get_their_own_result(client, org, kb, engine):
    r = await client.post(
        bulk_url(kb["id"]),
        files=parts(
            ("guide/setup.md", b"# Setup\n\nPlug it in."),
            ("notes.exe", b"MZ\x90\x00binary"),
            ("empty.txt", b""),
            ("../outside.md", b"Climbing out."),
            ("/etc/passwd.txt", b"Absolute."),
            ("./faq/./hours.txt", b"We open at nine."),
            ("fake.pdf", b"not a pdf at all"),
        ),
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["counts"] == {"created": 2, "updated": 0, "unchanged": 0, "failed": 5}
    summary = [(i["index"], i["path"], i["status"], i["error"]) for i in body["items"]]
    assert summary == [
        (0, "guide/setup.md", "created", None),
        (1, "notes.exe", "failed", "unsupported_media_type"),
        (2, "empty.txt", "failed", "bad_request"),
        (3, None, "failed", "validation_error"),
        (4, None, "failed", "validation_error"),
        (5, "faq/hours.txt", "created", None),
        (6, "fake.pdf", "failed", "unsupported_media_type"),
    ]
    assert body["items"][3]["detail"] == "the path must not contain '..': '../outside.md'"
    assert body["items"][4]["detail"] == "the path must be relative, not absolute: '/etc/passwd.txt'"
    created = body["items"][0]["document"]
    assert (created["source_path"], created["title"], created["file_name"], created["status"]) == (
        "guide/setup.md",
        "setup",
        "setup.md",
        "pending",
    )
    assert created["content_hash"] == hashlib.sha256(b"# Setup\n\nPlug it in.").hexdigest()
    assert await stored(engine, kb["id"]) == {
        "guide/setup.md": ("pending", hashlib.sha256(b"# Setup\n\nPlug it in.").hexdigest()),
        "faq/hours.txt": ("pending", hashlib.sha256(b"We open at nine.").hexdigest()),
    }


async def test_windows_absolute_paths_are_refused_as_absolute(client, org, kb, engine):
    # The multipart parser would keep only "x.txt" of such a name (a workaround for old
    # browsers): the two files would land at the top of the KB, one over the other.
    r = await client.post(
        bulk_url(kb["id"]),
        files=parts(("C:\\win\\x.txt", b"Drive letter."), ("\\\\server\\share\\x.txt", b"Share.")),
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    assert [(i["status"], i["detail"]) for i in r.json()["items"]] == [
        ("failed", "the path must be relative, not absolute: 'C:\\win\\x.txt'"),
        ("failed", "the path must be relative, not absolute: '\\\\server\\share\\x.txt'"),
    ]
    assert await stored(engine, kb["id"]) == {}


async def test_windows_separators_are_normalised(client, org, kb):
    r = await client.post(
        bulk_url(kb["id"]), files=parts(("docs\\win\\a.txt", b"Backslashes.")), headers=org.headers
    )
    assert [i["path"] for i in r.json()["items"]] == ["docs/win/a.txt"]


async def test_a_path_from_macos_and_from_linux_is_one_document(client, org, kb, engine):
    # macOS file systems may spell "é" as "e" and a combining accent; Linux keeps "é".
    r = await client.post(
        bulk_url(kb["id"]),
        files=parts(("menu/cafe\u0301.md", b"Coffee first."), ("menu/caf\u00e9.md", b"Coffee second.")),
        headers=org.headers,
    )
    assert [(i["path"], i["status"]) for i in r.json()["items"]] == [
        ("menu/caf\u00e9.md", "created"),
        ("menu/caf\u00e9.md", "updated"),
    ]
    assert list(await stored(engine, kb["id"])) == ["menu/caf\u00e9.md"]


async def test_a_path_with_a_right_to_left_override_is_refused(client, org, kb, engine):
    # Shown, "invoice\u202efdp.txt" reads "invoicetxt.pdf".
    r = await client.post(
        bulk_url(kb["id"]), files=parts(("invoice\u202efdp.txt", b"Pay.")), headers=org.headers
    )
    assert [(i["status"], i["detail"]) for i in r.json()["items"]] == [
        ("failed", "the path must not contain control characters")
    ]
    assert await stored(engine, kb["id"]) == {}


async def test_same_path_same_bytes_is_unchanged_and_not_reindexed(client, app, org, kb, engine, drain_queue):
    files = parts(("a.txt", b"Parking is free on Sundays."), ("b.txt", b"Dogs are welcome inside."))
    assert (await client.post(bulk_url(kb["id"]), files=files, headers=org.headers)).json()["counts"][
        "created"
    ] == 2
    assert await drain_queue() == {"ready": 2}
    counting = CountingEmbedder(app.state.embedder)
    app.state.embedder = counting

    r = await client.post(
        bulk_url(kb["id"]),
        files=parts(("a.txt", b"Parking is free on Sundays."), ("b.txt", b"Dogs must stay outside.")),
        headers=org.headers,
    )
    body = r.json()
    assert body["counts"] == {"created": 0, "updated": 1, "unchanged": 1, "failed": 0}
    unchanged, updated = body["items"]
    assert (unchanged["status"], unchanged["document"]["status"]) == ("unchanged", "ready")
    assert (updated["status"], updated["document"]["status"]) == ("updated", "pending")
    assert await drain_queue() == {"ready": 1}
    assert counting.texts == 1  # b.txt's one chunk, nothing of a.txt
    listed = await client.get(f"/api/knowledge/{kb['id']}/documents?source_path=b.txt", headers=org.headers)
    (doc,) = listed.json()["items"]
    assert doc["id"] == updated["document"]["id"]
    chunks = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}/chunks", headers=org.headers)
    assert [c["text"] for c in chunks.json()["items"]] == ["Dogs must stay outside."]


async def test_a_failed_document_is_tried_again_with_the_same_bytes(client, org, kb, drain_queue):
    page = ("blank.html", b"<html><body></body></html>")
    await client.post(bulk_url(kb["id"]), files=parts(page), headers=org.headers)
    assert await drain_queue() == {"failed": 1}
    r = await client.post(bulk_url(kb["id"]), files=parts(page), headers=org.headers)
    (item,) = r.json()["items"]
    assert (item["status"], item["document"]["status"], item["document"]["error"]) == (
        "updated",
        "pending",
        None,
    )


async def test_new_path_with_content_held_elsewhere_is_a_duplicate(client, org, kb, engine):
    first = await create_text_doc(client, org.headers, kb["id"], content="Same words.")
    r = await client.post(bulk_url(kb["id"]), files=parts(("copy.txt", b"Same words.")), headers=org.headers)
    (item,) = r.json()["items"]
    assert (item["status"], item["error"]) == ("failed", "duplicate_document")
    assert first["id"] in item["detail"]
    r = await client.post(
        bulk_url(kb["id"], "?allow_duplicate=true"),
        files=parts(("copy.txt", b"Same words.")),
        headers=org.headers,
    )
    assert r.json()["items"][0]["status"] == "created"
    assert set(await stored(engine, kb["id"])) == {None, "copy.txt"}


async def test_single_endpoints_keep_one_document_per_path(client, org, kb):
    url = f"/api/knowledge/{kb['id']}/documents"
    made = await create_text_doc(client, org.headers, kb["id"], content="First.", source_path="./a/b.txt")
    assert made["source_path"] == "a/b.txt"
    # Another document at the same path is refused even with allow_duplicate.
    r = await client.post(
        f"{url}?allow_duplicate=true",
        files={"file": ("b.txt", b"Second.", "text/plain")},
        data={"source_path": "a/b.txt"},
        headers=org.headers,
    )
    assert r.status_code == 409
    assert (r.json()["error"], r.json()["existing_document"]["id"]) == ("duplicate_document", made["id"])
    other = await create_text_doc(client, org.headers, kb["id"], content="Other.", source_path="c.txt")
    r = await client.put(f"{url}/{other['id']}", json={"source_path": "a/b.txt"}, headers=org.headers)
    assert r.status_code == 409
    r = await client.put(f"{url}/{other['id']}", json={"source_path": "moved/c.txt"}, headers=org.headers)
    assert (r.status_code, r.json()["source_path"]) == (200, "moved/c.txt")
    # The moved document is found at its new path: the same bytes there are unchanged.
    r = await client.post(bulk_url(kb["id"]), files=parts(("moved/c.txt", b"Other.")), headers=org.headers)
    assert [(i["status"], i["document"]["id"]) for i in r.json()["items"]] == [("unchanged", other["id"])]
    r = await client.post(
        url, json={"title": "t", "content": "x", "source_path": "../x"}, headers=org.headers
    )
    assert r.status_code == 422


async def test_without_paths_every_file_is_a_new_document(client, org, kb, engine):
    files = parts(("a.txt", b"One."), ("a.txt", b"Two."))
    r = await client.post(bulk_url(kb["id"], "?use_paths=false"), files=files, headers=org.headers)
    assert [(i["status"], i["path"]) for i in r.json()["items"]] == [("created", None), ("created", None)]
    assert list(await stored(engine, kb["id"])) == [None]  # both documents have no path


async def test_list_documents_paginates_and_filters_by_path(client, org, kb):
    files = parts(*((f"d/{n}.txt", f"Document number {n}.".encode()) for n in range(5)))
    await client.post(bulk_url(kb["id"]), files=files, headers=org.headers)
    url = f"/api/knowledge/{kb['id']}/documents"
    page = (await client.get(f"{url}?limit=2&offset=2", headers=org.headers)).json()
    assert (page["total"], [d["source_path"] for d in page["items"]]) == (5, ["d/2.txt", "d/3.txt"])
    page = (await client.get(f"{url}?source_path=d//3.txt", headers=org.headers)).json()
    assert (page["total"], [d["source_path"] for d in page["items"]]) == (1, ["d/3.txt"])
    # A path no document can have finds none, as any other path no document has.
    page = (await client.get(f"{url}?source_path=../d/3.txt", headers=org.headers)).json()
    assert (page["total"], page["items"]) == (0, [])


async def test_delete_many_by_ids_and_paths(client, org, other_org, kb, engine):
    files = parts(("a.txt", b"Alpha."), ("b.txt", b"Bravo."), ("c.txt", b"Charlie."))
    items = (await client.post(bulk_url(kb["id"]), files=files, headers=org.headers)).json()["items"]
    a_id = items[0]["document"]["id"]
    other_kb = await create_kb(client, other_org.headers)
    foreign = await create_text_doc(client, other_org.headers, other_kb["id"], content="Theirs.")
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents/bulk-delete",
        json={"ids": [a_id, foreign["id"]], "paths": ["./b.txt", "nowhere.txt"]},
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["deleted"], body["not_found"]) == (2, 2)
    assert [(i["id"], i["path"], i["status"]) for i in body["items"]] == [
        (a_id, None, "deleted"),
        (foreign["id"], None, "not_found"),
        (items[1]["document"]["id"], "b.txt", "deleted"),
        (None, "nowhere.txt", "not_found"),
    ]
    assert set(await stored(engine, kb["id"])) == {"c.txt"}
    r = await client.get(
        f"/api/knowledge/{other_kb['id']}/documents/{foreign['id']}", headers=other_org.headers
    )
    assert r.status_code == 200


async def test_another_organisations_kb_is_404_and_untouched(client, org, other_org, engine):
    theirs = await create_kb(client, other_org.headers)
    await client.post(bulk_url(theirs["id"]), files=parts(("a.txt", b"Theirs.")), headers=other_org.headers)
    base = f"/api/knowledge/{theirs['id']}/documents"
    r = await client.post(bulk_url(theirs["id"]), files=parts(("a.txt", b"Mine now.")), headers=org.headers)
    assert (r.status_code, r.json()["detail"]) == (404, "knowledge base not found")
    r = await client.post(f"{base}/bulk-delete", json={"paths": ["a.txt"]}, headers=org.headers)
    assert r.status_code == 404
    assert (await client.get(f"{base}?source_path=a.txt", headers=org.headers)).status_code == 404
    assert await stored(engine, theirs["id"]) == {
        "a.txt": ("pending", hashlib.sha256(b"Theirs.").hexdigest())
    }


async def test_bad_requests_store_nothing(client, org, kb, engine):
    r = await client.post(
        bulk_url(kb["id"]), files=parts(("a.txt", b"x")), data={"title": "t"}, headers=org.headers
    )
    assert (r.status_code, r.json()["detail"]) == (422, "unknown form fields: title")
    r = await client.post(bulk_url(kb["id"]), files=[("file", (None, b"not a file"))], headers=org.headers)
    assert (r.status_code, r.json()["detail"]) == (422, "every 'file' part must be a file (with a file name)")
    r = await client.post(bulk_url(kb["id"]), json={"file": "x"}, headers=org.headers)
    assert r.status_code == 415
    assert await stored(engine, kb["id"]) == {}


async def test_limits(database_url, settings, sessionmaker, engine):
    limits = settings.limits.model_copy(
        update={"bulk_max_files": 3, "max_upload_bytes": 4096, "documents_per_kb": 2}
    )
    small = settings.model_copy(update={"limits": limits})
    org = await make_org(sessionmaker, "Small")
    async with AsyncTestClient(app=create_app(small, database_url=database_url, resolver=fake_resolver)) as c:
        kb = await create_kb(c, org.headers)
        r = await c.post(
            bulk_url(kb["id"]), files=parts(*((f"{n}.txt", b"x") for n in range(4))), headers=org.headers
        )
        assert (r.status_code, r.json()["detail"]) == (422, "at most 3 files in one bulk upload; 4 were sent")
        r = await c.post(bulk_url(kb["id"]), files=parts(("big.txt", b"a" * 80_000)), headers=org.headers)
        assert r.status_code == 413
        # The body is too large, not a part's headers, as the reply said.
        assert r.json()["detail"] == "the request body is larger than the limit of 68 KB"
        r = await c.post(
            bulk_url(kb["id"]),
            files=parts(("1.txt", b"One."), ("2.txt", b"Two."), ("3.txt", b"Three.")),
            headers=org.headers,
        )
        assert [(i["status"], i["error"]) for i in r.json()["items"]] == [
            ("created", None),
            ("created", None),
            ("failed", "quota_exceeded"),
        ]
        r = await c.post(
            f"/api/knowledge/{kb['id']}/documents/bulk-delete",
            json={"ids": [], "paths": ["1.txt", "2.txt", "3.txt", "4.txt"]},
            headers=org.headers,
        )
        assert (r.status_code, r.json()["detail"]) == (422, "at most 3 ids and paths in one request")
    assert set(await stored(engine, kb["id"])) == {"1.txt", "2.txt"}
