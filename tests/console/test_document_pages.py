"""Document pages: the list with live status, adding (files, URL, text), editing, re-sync,
deleting, chunks, escaping, scoping and pagination."""

from __future__ import annotations

import re
import uuid
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import Org
from tests.console.helpers import assert_ids_unique, assert_labelled, form, text_of
from tests.helpers import create_kb, create_text_doc

Client = AsyncTestClient[Litestar]
Browser = tuple[Client, str]


async def api_docs(client: Client, org: Org, kb_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/api/knowledge/{kb_id}", headers=org.headers)
    assert r.status_code == 200
    docs: list[dict[str, Any]] = r.json()["documents"]
    return docs


async def api_doc(client: Client, org: Org, kb_id: str, doc_id: str) -> dict[str, Any]:
    r = await client.get(f"/api/knowledge/{kb_id}/documents/{doc_id}", headers=org.headers)
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


def polls(page: str) -> bool:
    return bool(re.search(r'<div id="documents"[^>]*hx-trigger="every 2s"', page))


# -- the list and its live status ---------------------------------------------------------


async def test_list_polls_only_while_work_is_pending(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"], content="We open at nine.")
    page = await browser.get(f"/console/knowledge/{kb['id']}")
    assert page.status_code == 200
    assert '<span class="status status-pending">pending</span>' in page.text
    assert polls(page.text)
    assert f'hx-get="/console/knowledge/{kb["id"]}/documents/table?page=1"' in page.text

    await drain_queue()
    # The fragment htmx fetches: the table alone, now without polling.
    fragment = await browser.get(
        f"/console/knowledge/{kb['id']}/documents/table", headers={"HX-Request": "true"}
    )
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<div id="documents"')
    assert "<html" not in fragment.text
    assert '<span class="status status-ready">ready</span>' in fragment.text
    assert not polls(fragment.text)
    assert not polls((await browser.get(f"/console/knowledge/{kb['id']}")).text)


def facts(page: str) -> dict[str, str]:
    card = re.search(r'<dl id="kb-facts"[^>]*>(.*?)</dl>', page, re.S)
    assert card, "no facts card"
    return dict(re.findall(r"<dt>(Documents|Chunks)</dt><dd>([^<]*)</dd>", card.group(1)))


async def test_the_polled_table_brings_the_facts_cards_counts(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"], content="We open at nine.")
    page = await browser.get(f"/console/knowledge/{kb['id']}")
    assert facts(page.text) == {"Documents": "1", "Chunks": "0"}
    # On the page itself the card is in place; only the fragment swaps it out of band.
    assert '<dl id="kb-facts" class="facts card">' in page.text
    assert page.text.count('id="kb-facts"') == 1

    await drain_queue()
    fragment = await browser.get(
        f"/console/knowledge/{kb['id']}/documents/table", headers={"HX-Request": "true"}
    )
    assert fragment.status_code == 200
    assert '<dl id="kb-facts" class="facts card" hx-swap-oob="true">' in fragment.text
    assert facts(fragment.text) == {"Documents": "1", "Chunks": "1"}
    assert '<td class="num">1</td>' in fragment.text


async def test_processing_shows_progress(
    signed_in: Browser, client: Client, org: Org, engine: AsyncEngine
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        # A worker's state halfway through (what the worker writes as it embeds).
        await conn.exec_driver_sql(
            "UPDATE documents SET status = 'processing', progress_done = 3, progress_total = 8 "
            f"WHERE id = '{doc['id']}'"
        )
    page = await browser.get(f"/console/knowledge/{kb['id']}")
    assert '<progress value="3" max="8"' in page.text
    assert polls(page.text)
    status = await browser.get(
        f"/console/knowledge/{kb['id']}/documents/{doc['id']}/status", headers={"HX-Request": "true"}
    )
    assert '<progress value="3" max="8"' in status.text
    assert 'hx-trigger="every 2s"' in status.text
    assert "hx-refresh" not in status.headers


async def test_status_fragment_reloads_the_page_once_done(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    page = await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}")
    assert f'hx-get="/console/knowledge/{kb["id"]}/documents/{doc["id"]}/status"' in page.text
    await drain_queue()
    status = await browser.get(
        f"/console/knowledge/{kb['id']}/documents/{doc['id']}/status", headers={"HX-Request": "true"}
    )
    assert status.headers["hx-refresh"] == "true"
    assert "hx-trigger" not in status.text


async def test_failure_reason_and_skipped_pages_are_shown(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any, engine: AsyncEngine
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    empty = await create_text_doc(client, org.headers, kb["id"], content="<p> </p>", content_type="html")
    pdf = await create_text_doc(client, org.headers, kb["id"], content="Page text.")
    await drain_queue()
    assert (await api_doc(client, org, kb["id"], empty["id"]))["status"] == "failed"
    async with engine.begin() as conn:
        await conn.exec_driver_sql(
            f"UPDATE documents SET pages_total = 12, pages_skipped = 2 WHERE id = '{pdf['id']}'"
        )
    page = text_of((await browser.get(f"/console/knowledge/{kb['id']}")).text)
    assert "failed no text found" in page
    assert "2 page(s) skipped of 12" in page
    detail = text_of((await browser.get(f"/console/knowledge/{kb['id']}/documents/{empty['id']}")).text)
    assert "failed no text found" in detail


# -- adding documents ----------------------------------------------------------------------


async def test_add_page_has_three_labelled_forms(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    page = await browser.get(f"/console/knowledge/{kb['id']}/documents/new")
    assert page.status_code == 200
    for action in ("upload", "url", "text"):
        assert f'action="/console/knowledge/{kb["id"]}/documents/{action}"' in page.text
    assert page.text.count(f'<input type="hidden" name="csrf_token" value="{csrf}">') == 4  # + sign out
    assert '<input type="file" id="field-files" name="files" multiple required' in page.text
    assert '<div class="dropzone">' in page.text
    assert_labelled(page.text)


async def test_each_add_form_labels_its_own_controls(signed_in: Browser, client: Client, org: Org) -> None:
    """The URL and text forms both have a title: each label names its own form's input, and
    an error summary links to the field of the form that failed."""
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    base = f"/console/knowledge/{kb['id']}/documents"
    page = await browser.get(f"{base}/new")
    assert_ids_unique(page.text)
    assert '<label for="url-title">Title</label>' in page.text
    assert '<label for="text-title">Title <span class="required">(required)</span></label>' in page.text

    empty_url = await browser.post(
        f"{base}/url", data=form(csrf, url="  ", title="", description="", sync_interval_s="")
    )
    assert empty_url.status_code == 422
    assert_ids_unique(empty_url.text)
    assert '<a href="#url-url">url</a>' in empty_url.text
    assert re.search(r'id="url-url"[^>]*aria-describedby="error-url-url"', empty_url.text)

    empty_text = await browser.post(
        f"{base}/text", data=form(csrf, title="", description="", content="x", content_type="text")
    )
    assert empty_text.status_code == 422
    assert_ids_unique(empty_text.text)
    assert '<a href="#text-title">title</a>' in empty_text.text
    assert re.search(r'id="text-title"[^>]*aria-describedby="error-text-title"', empty_text.text)


async def test_upload_several_files_at_once(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/upload",
        data=form(csrf),
        files=[
            ("files", ("hours.txt", b"We open at nine.", "text/plain")),
            ("files", ("prices.md", b"# Prices\n\nA check-up costs 40 euros.", "text/markdown")),
            ("files", ("team.html", b"<h1>Team</h1><p>Dr. Smith.</p>", "text/html")),
        ],
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert r.headers["location"] == f"/console/knowledge/{kb['id']}?done=docs-added"
    docs = await api_docs(client, org, kb["id"])
    assert sorted((d["title"], d["source_kind"], d["status"]) for d in docs) == [
        ("hours", "text", "pending"),
        ("prices", "markdown", "pending"),
        ("team", "html", "pending"),
    ]
    page = await browser.get(r.headers["location"])
    assert "Documents added: they are being processed." in text_of(page.text)


async def test_upload_reports_each_refused_file_and_keeps_the_others(
    signed_in: Browser, client: Client, org: Org
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"], content="Already here.")
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/upload",
        data=form(csrf),
        files=[
            ("files", ("good.txt", b"Parking is free.", "text/plain")),
            ("files", ("empty.txt", b"", "text/plain")),
            ("files", ("tool.exe", b"MZ\x90\x00\x03binary", "application/octet-stream")),
            ("files", ("again.txt", b"Already here.", "text/plain")),
        ],
        follow_redirects=False,
    )
    assert r.status_code == 200
    text = text_of(r.text)
    assert "1 of 4 file(s) added; the others were refused." in text
    assert "empty.txt the uploaded file is empty" in text
    assert "tool.exe" in text
    assert "upload .txt, .md, .html, .pdf, .docx, .pptx, .xlsx or .csv" in text
    assert "again.txt this knowledge base already holds a document with this content" in text
    assert "good.txt Added as good" in text
    titles = sorted(d["title"] for d in await api_docs(client, org, kb["id"]))
    assert titles == ["Opening hours", "good"]


async def test_upload_with_duplicates_allowed(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"], content="Same bytes.")
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/upload",
        data=form(csrf, allow_duplicate="1"),
        files=[("files", ("copy.txt", b"Same bytes.", "text/plain"))],
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert len(await api_docs(client, org, kb["id"])) == 2


async def test_upload_with_every_file_refused_or_none_chosen(
    signed_in: Browser, client: Client, org: Org
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    url = f"/console/knowledge/{kb['id']}/documents/upload"
    r = await browser.post(
        url, data=form(csrf), files=[("files", ("empty.txt", b"", "text/plain"))], follow_redirects=False
    )
    assert r.status_code == 422
    assert "None of the files were added." in text_of(r.text)
    # A file input left empty sends one part with no file name.
    r = await browser.post(url, data=form(csrf), files=[("files", ("", b"", "application/octet-stream"))])
    assert r.status_code == 422
    assert "Choose at least one file." in text_of(r.text)
    assert await api_docs(client, org, kb["id"]) == []


async def test_upload_of_more_files_than_the_api_takes_at_once_is_refused(
    signed_in: Browser, client: Client, org: Org
) -> None:
    # The API's bulk upload takes at most LIMITS__BULK_MAX_FILES (100): the console took 200.
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    files = [("files", (f"{i}.txt", f"Fact number {i}.".encode(), "text/plain")) for i in range(101)]
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/upload",
        data=form(csrf),
        files=files,
        follow_redirects=False,
    )
    assert r.status_code == 413
    assert "Choose at most 100 files at once; 101 were chosen." in text_of(r.text)
    assert await api_docs(client, org, kb["id"]) == []


async def test_add_a_web_page(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/url",
        data=form(csrf, url="https://example.com/faq", title="", description="", sync_interval_s="3600"),
        follow_redirects=False,
    )
    assert r.status_code == 303
    (doc,) = await api_docs(client, org, kb["id"])
    assert r.headers["location"] == f"/console/knowledge/{kb['id']}/documents/{doc['id']}?done=doc-added"
    stored = await api_doc(client, org, kb["id"], doc["id"])
    assert (stored["source_url"], stored["source_kind"], stored["status"]) == (
        "https://example.com/faq",
        "url",
        "pending",
    )
    # The same URL again is refused, naming the document that has it.
    again = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/url",
        data=form(csrf, url="https://example.com/faq", title="", description="", sync_interval_s=""),
        follow_redirects=False,
    )
    assert again.status_code == 409
    assert "already holds a document from this URL" in text_of(again.text)
    assert 'value="https://example.com/faq"' in again.text


async def test_add_url_refusals(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    url = f"/console/knowledge/{kb['id']}/documents/url"
    blocked = await browser.post(
        url, data=form(csrf, url="http://127.0.0.1/admin", title="", description="", sync_interval_s="")
    )
    assert blocked.status_code == 400
    assert "this URL cannot be fetched" in text_of(blocked.text)
    empty = await browser.post(url, data=form(csrf, url="  ", title="", description="", sync_interval_s=""))
    assert empty.status_code == 422
    assert "must not be empty or only whitespace" in text_of(empty.text)
    assert await api_docs(client, org, kb["id"]) == []


async def test_add_text_then_see_its_chunks(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/text",
        data=form(
            csrf,
            title="Prices",
            description="2026",
            content="# Prices\r\n\r\n## Check-ups\r\n\r\nA check-up costs 40 euros.",
            content_type="markdown",
        ),
        follow_redirects=False,
    )
    assert r.status_code == 303
    (doc,) = await api_docs(client, org, kb["id"])
    assert doc["source_kind"] == "markdown"
    await drain_queue()
    page = await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}")
    text = text_of(page.text)
    assert "ready" in text
    assert "A check-up costs 40 euros." in text
    assert re.search(r"#1 · Check-ups · \d+ tokens", text), text


async def test_add_text_refusals(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    url = f"/console/knowledge/{kb['id']}/documents/text"
    r = await browser.post(url, data=form(csrf, title="", description="", content="x", content_type="text"))
    assert r.status_code == 422
    assert "must not be empty or only whitespace" in text_of(r.text)
    r = await browser.post(url, data=form(csrf, title="T", description="", content="", content_type="pdf"))
    assert r.status_code == 422
    assert "content" in r.text
    assert "Input should be 'text', 'markdown' or 'html'" in text_of(r.text)
    assert await api_docs(client, org, kb["id"]) == []


# -- editing, re-sync, deleting ------------------------------------------------------------


async def test_edit_title_without_touching_the_content_reindexes_nothing(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="Line one.\nLine two.")
    await drain_queue()
    edit = await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}/edit")
    assert ">Line one.\nLine two.</textarea>" in edit.text
    # The browser sends the text box back with CRLF line breaks.
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/{doc['id']}/edit",
        data=form(
            csrf,
            title="Renamed",
            description="New words",
            content="Line one.\r\nLine two.",
            content_type="text",
        ),
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert r.headers["location"] == f"/console/knowledge/{kb['id']}/documents/{doc['id']}?done=doc-updated"
    stored = await api_doc(client, org, kb["id"], doc["id"])
    assert (stored["title"], stored["description"], stored["status"]) == ("Renamed", "New words", "ready")


async def test_edit_content_requeues(signed_in: Browser, client: Client, org: Org, drain_queue: Any) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="Old words.")
    await drain_queue()
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/{doc['id']}/edit",
        data=form(csrf, title="Opening hours", description="", content="New words.", content_type="text"),
        follow_redirects=False,
    )
    assert r.status_code == 303
    assert (await api_doc(client, org, kb["id"], doc["id"]))["status"] == "pending"
    await drain_queue()
    chunks = await client.get(f"/api/knowledge/{kb['id']}/documents/{doc['id']}/chunks", headers=org.headers)
    assert [c["text"] for c in chunks.json()["items"]] == ["New words."]


async def test_edit_refuses_a_blank_title(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/{doc['id']}/edit",
        data=form(csrf, title="", description="", content="We open at nine.", content_type="text"),
    )
    assert r.status_code == 422
    assert "must not be empty or only whitespace" in text_of(r.text)
    assert (await api_doc(client, org, kb["id"], doc["id"]))["title"] == "Opening hours"


async def test_url_document_edit_has_no_content_box_and_resyncs(
    signed_in: Browser, client: Client, org: Org, engine: AsyncEngine
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    r = await client.post(
        f"/api/knowledge/{kb['id']}/documents", json={"url": "https://example.com/a"}, headers=org.headers
    )
    doc = r.json()
    edit = await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}/edit")
    assert 'name="content"' not in edit.text
    assert "Re-sync now" in text_of(edit.text)
    async with engine.begin() as conn:  # as after a fetch that failed
        await conn.exec_driver_sql(
            f"UPDATE documents SET status = 'failed', error = 'HTTP 500', attempts = 3 WHERE id = '{doc['id']}'"
        )
    page = await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}")
    assert f'action="/console/knowledge/{kb["id"]}/documents/{doc["id"]}/sync"' in page.text
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/{doc['id']}/sync", data=form(csrf), follow_redirects=False
    )
    assert r.status_code == 303
    stored = await api_doc(client, org, kb["id"], doc["id"])
    assert (stored["status"], stored["error"], stored["attempts"]) == ("pending", None, 0)


async def test_resync_of_a_text_document_is_a_conflict(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    page = await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}")
    assert "/sync" not in page.text
    r = await browser.post(f"/console/knowledge/{kb['id']}/documents/{doc['id']}/sync", data=form(csrf))
    assert r.status_code == 409
    assert "only URL documents can be re-synced" in text_of(r.text)


async def test_delete_asks_first_then_deletes(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"])
    confirm = await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}/delete")
    assert confirm.status_code == 200
    assert "This deletes the document Opening hours" in text_of(confirm.text)
    assert len(await api_docs(client, org, kb["id"])) == 1
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/{doc['id']}/delete", data=form(csrf), follow_redirects=False
    )
    assert r.status_code == 303
    assert r.headers["location"] == f"/console/knowledge/{kb['id']}?done=doc-deleted"
    assert await api_docs(client, org, kb["id"]) == []


# -- escaping, scoping ---------------------------------------------------------------------


async def test_script_in_a_title_is_shown_as_text(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers)
    r = await browser.post(
        f"/console/knowledge/{kb['id']}/documents/text",
        data=form(
            csrf, title="<script>alert(1)</script>", description="", content="Hello.", content_type="text"
        ),
        follow_redirects=False,
    )
    assert r.status_code == 303
    (doc,) = await api_docs(client, org, kb["id"])
    assert doc["title"] == "<script>alert(1)</script>"
    base = f"/console/knowledge/{kb['id']}"
    for path in (
        base,
        f"{base}/documents/{doc['id']}",
        f"{base}/documents/{doc['id']}/edit",
        f"{base}/documents/{doc['id']}/delete",
    ):
        page = (await browser.get(path)).text
        assert "<script>alert" not in page, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path


async def test_another_organisations_documents_are_not_found(
    signed_in: Browser, client: Client, org: Org, other_org: Org
) -> None:
    browser, csrf = signed_in
    ours = await create_kb(client, org.headers)
    theirs = await create_kb(client, other_org.headers)
    doc = await create_text_doc(client, other_org.headers, theirs["id"], content="Globex only.")
    for kb_id in (theirs["id"], ours["id"]):  # their KB, and their document under our KB
        base = f"/console/knowledge/{kb_id}/documents/{doc['id']}"
        for path in (base, f"{base}/edit", f"{base}/delete", f"{base}/status"):
            r = await browser.get(path)
            assert r.status_code == 404, path
            assert "Globex only." not in r.text
        for path in (f"{base}/edit", f"{base}/delete", f"{base}/sync"):
            r = await browser.post(path, data=form(csrf, title="Mine", description="", content="x"))
            assert r.status_code == 404, path
    for path in ("", "/documents/table"):
        assert (await browser.get(f"/console/knowledge/{theirs['id']}{path}")).status_code == 404
    for action in ("text", "url", "upload"):
        r = await browser.post(
            f"/console/knowledge/{theirs['id']}/documents/{action}",
            data=form(csrf, title="T", content="x", url="https://example.com/", description=""),
            files=[("files", ("a.txt", b"x", "text/plain"))] if action == "upload" else None,
        )
        assert r.status_code == 404, action
    stored = await api_doc(client, other_org, theirs["id"], doc["id"])
    assert stored["title"] == "Opening hours"
    assert len(await api_docs(client, other_org, theirs["id"])) == 1


# -- pagination ----------------------------------------------------------------------------


async def insert_documents(engine: AsyncEngine, org: Org, kb_id: str, count: int) -> None:
    async with engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO documents (id, org_id, kb_id, title, source_kind, status, created_at) "
            f"SELECT gen_random_uuid(), '{org.id}', '{kb_id}', 'Doc ' || lpad(n::text, 4, '0'), 'text', 'ready', "
            "timestamp '2026-01-01' + n * interval '1 minute' FROM generate_series(1, "
            f"{count}) AS n"
        )


def doc_numbers(page: str) -> list[int]:
    return [int(n) for n in re.findall(r">Doc (\d{4})</a>", page)]


async def test_documents_are_paginated_newest_first(
    signed_in: Browser, client: Client, org: Org, engine: AsyncEngine
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    await insert_documents(engine, org, kb["id"], 120)
    first = await browser.get(f"/console/knowledge/{kb['id']}")
    assert doc_numbers(first.text) == list(range(120, 70, -1))
    assert "1–50 of 120" in text_of(first.text)
    third = await browser.get(f"/console/knowledge/{kb['id']}?page=3")
    assert doc_numbers(third.text) == list(range(20, 0, -1))
    assert f'href="/console/knowledge/{kb["id"]}?page=2" rel="prev"' in third.text
    assert not polls(third.text)  # nothing pending


async def test_a_page_of_documents_takes_the_same_statements_for_1000_as_for_10(
    signed_in: Browser, client: Client, org: Org, engine: AsyncEngine
) -> None:
    browser, _ = signed_in
    small = await create_kb(client, org.headers, title="Small")
    large = await create_kb(client, org.headers, title="Large")
    await insert_documents(engine, org, small["id"], 10)
    await insert_documents(engine, org, large["id"], 1000)
    app_engine: AsyncEngine = browser.app.state.engine
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(app_engine.sync_engine, "before_cursor_execute", count)
    try:
        counts = []
        for kb in (small, large):
            statements.clear()
            page = await browser.get(f"/console/knowledge/{kb['id']}")
            assert page.status_code == 200
            counts.append(len(statements))
    finally:
        event.remove(app_engine.sync_engine, "before_cursor_execute", count)
    assert counts[0] == counts[1]
    assert counts[1] <= 4  # the KB, its documents page, their count, and nothing per document
    assert len(doc_numbers(page.text)) == 50


async def test_chunks_are_paginated(signed_in: Browser, client: Client, org: Org, drain_queue: Any) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers, chunk_tokens=64, chunk_overlap_tokens=0)
    content = "\n\n".join(f"Paragraph {n}: " + " ".join(["opening hours and prices"] * 12) for n in range(40))
    doc = await create_text_doc(client, org.headers, kb["id"], content=content)
    await drain_queue()
    total = (await api_doc(client, org, kb["id"], doc["id"]))["chunk_count"]
    assert total > 20
    base = f"/console/knowledge/{kb['id']}/documents/{doc['id']}"
    first = text_of((await browser.get(base)).text)
    assert f"1–20 of {total}" in first
    assert "#1 ·" in first
    assert "#21 ·" not in first
    second = text_of((await browser.get(f"{base}?page=2")).text)
    assert "#21 ·" in second
    assert "#20 ·" not in second


async def test_unknown_document_and_malformed_id(signed_in: Browser, client: Client, org: Org) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    r = await browser.get(f"/console/knowledge/{kb['id']}/documents/{uuid.uuid4()}")
    assert r.status_code == 404
    assert "document not found" in text_of(r.text)
    assert (await browser.get(f"/console/knowledge/{kb['id']}/documents/nope")).status_code == 400


async def test_a_failed_new_version_says_the_previous_one_still_answers(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="We open at eight.")
    await drain_queue()
    r = await client.put(
        f"/api/knowledge/{kb['id']}/documents/{doc['id']}",
        json={"content": "<p> </p>", "content_type": "html"},
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    await drain_queue()
    shown = await api_doc(client, org, kb["id"], doc["id"])
    assert (shown["status"], shown["chunk_count"]) == ("failed", 1)
    detail = text_of((await browser.get(f"/console/knowledge/{kb['id']}/documents/{doc['id']}")).text)
    assert "failed no text found" in detail
    assert "The previous version (1 chunk) still answers questions." in detail
