"""A knowledge base's documents: the list (with live progress), adding by upload, URL or
text, editing, re-syncing, deleting, and the chunks a document was indexed as."""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import FormMultiDict, UploadFile
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath
from litestar.response import Template

from app.console.forms import FieldErrors, app_error_fields, form_int, form_text, form_values, validated
from app.console.knowledge_pages import provide_kb
from app.console.web import PageNumber, Pager, redirect, render
from app.documents.schemas import DocumentCreateText, DocumentCreateUrl, DocumentRead, DocumentUpdate
from app.documents.service import DocumentService, DuplicateDocument
from app.errors import AppError, BadRequest, NotFound, size_text
from app.knowledge.schemas import KnowledgeBaseRead

DOCUMENTS_PER_PAGE = 50
CHUNKS_PER_PAGE = 20
# While any document shown is queued or being ingested, its fragment asks again this often.
POLL_SECONDS = 2
BUSY = ("pending", "processing")
CONTENT_TYPES = [("text", "Plain text"), ("markdown", "Markdown"), ("html", "HTML")]
SYNC_INTERVALS = [
    ("", "Default for this service"),
    ("0", "Never"),
    ("3600", "Every hour"),
    ("86400", "Every day"),
    ("604800", "Every week"),
]


def busy(documents: list[DocumentRead]) -> bool:
    return any(d.status in BUSY for d in documents)


def textarea_text(value: str) -> str:
    """Browsers send a textarea's line breaks as CRLF; the content keeps the LF it was given."""
    return value.replace("\r\n", "\n")


class DocumentPages(Controller):
    path = "/knowledge/{kb_id:str}"
    dependencies = {"kb": Provide(provide_kb)}

    @get("/", summary="A knowledge base and its documents")
    async def kb_page(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
        page: PageNumber = 1,
    ) -> Template:
        context = await _table(document_service, kb_id, page)
        return render(request, "documents/list.html", kb=kb, kb_id=kb_id, **context)

    @get(
        "/documents/table",
        summary="The documents table and the KB's counts (htmx polls them while work is pending)",
    )
    async def table_fragment(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
        page: PageNumber = 1,
    ) -> Template:
        context = await _table(document_service, kb_id, page)
        return render(request, "documents/_table.html", kb=kb, kb_id=kb_id, facts_oob=True, **context)

    @get("/documents/new", summary="The forms to add documents")
    async def new_page(
        self, request: Request[Any, Any, Any], kb: NamedDependency[KnowledgeBaseRead]
    ) -> Template:
        return _add_forms(request, kb)

    @post("/documents/upload", summary="Add documents from uploaded files (several at once)")
    async def upload(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
    ) -> Response[Any]:
        form = await request.form()
        files = [f for f in form.getall("files", []) if isinstance(f, UploadFile) and f.filename]
        if not files:
            return _add_forms(request, kb, form="upload", errors={"files": "Choose at least one file."})
        most = document_service.limits.bulk_max_files  # as the API's bulk upload
        if len(files) > most:
            message = f"Choose at most {most} files at once; {len(files)} were chosen."
            return _add_forms(request, kb, form="upload", errors={"files": message}, status_code=413)
        results = [
            await _upload_one(document_service, kb_id, upload, allow_duplicate=_allow_duplicate(form))
            for upload in files
        ]
        added = [doc for _, doc, _ in results if doc is not None]
        if len(added) == len(results):
            return redirect(f"/console/knowledge/{kb_id}", done="docs-added")
        return render(
            request,
            "documents/uploaded.html",
            status_code=200 if added else 422,
            kb=kb,
            results=results,
            added=len(added),
        )

    @post("/documents/url", summary="Add a web page")
    async def add_url(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
    ) -> Response[Any]:
        form = await request.form()
        values = form_values(form, ("url", "title", "description", "sync_interval_s"))
        errors: FieldErrors = {}
        data: dict[str, Any] = {"url": values["url"], "description": values["description"]}
        if values["title"].strip():
            data["title"] = values["title"]
        interval = form_int(form, "sync_interval_s", errors)
        if interval is not None:
            data["sync_interval_s"] = interval
        create, errors = validated(DocumentCreateUrl, data, errors)
        if create is None or errors:
            return _add_forms(request, kb, form="url", values=values, errors=errors)
        try:
            doc = await document_service.create_url(kb_id, create, allow_duplicate=_allow_duplicate(form))
        except DuplicateDocument as exc:
            return _add_forms(
                request, kb, form="url", values=values, errors={"url": exc.detail}, status_code=409
            )
        except BadRequest as exc:
            return _add_forms(
                request, kb, form="url", values=values, errors={"url": exc.detail}, status_code=400
            )
        return redirect(f"/console/knowledge/{kb_id}/documents/{doc.id}", done="doc-added")

    @post("/documents/text", summary="Add a document written or pasted as text")
    async def add_text(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
    ) -> Response[Any]:
        form = await request.form()
        values = form_values(form, _TEXT_FIELDS)
        create, errors = validated(
            DocumentCreateText,
            {
                "title": values["title"],
                "description": values["description"],
                "content": textarea_text(values["content"]),
                "content_type": values["content_type"] or "text",
            },
        )
        if create is None:
            return _add_forms(request, kb, form="text", values=values, errors=errors)
        try:
            doc = await document_service.create_text(kb_id, create, allow_duplicate=_allow_duplicate(form))
        except DuplicateDocument as exc:
            return _add_forms(
                request, kb, form="text", values=values, errors={"content": exc.detail}, status_code=409
            )
        except AppError as exc:
            return _add_forms(
                request,
                kb,
                form="text",
                values=values,
                errors=app_error_fields(exc),
                status_code=exc.status_code,
            )
        return redirect(f"/console/knowledge/{kb_id}/documents/{doc.id}", done="doc-added")

    @get("/documents/{doc_id:str}", summary="A document: status, facts and its chunks (paginated)")
    async def document_page(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
        page: PageNumber = 1,
    ) -> Template:
        doc = await document_service.get(kb_id, doc_id)
        chunks = await document_service.chunks(
            kb_id, doc_id, limit=CHUNKS_PER_PAGE, offset=(page - 1) * CHUNKS_PER_PAGE
        )
        pager = Pager(page=page, size=CHUNKS_PER_PAGE, total=chunks.total)
        return render(
            request,
            "documents/show.html",
            kb=kb,
            doc=doc,
            chunks=chunks.items,
            pager=pager,
            poll=POLL_SECONDS,
        )

    @get("/documents/{doc_id:str}/status", summary="A document's status alone (htmx polls it)")
    async def status_fragment(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
    ) -> Template:
        doc = await document_service.get(kb_id, doc_id)
        # Done while the page was open: reload it in full, so its chunks show.
        headers = {"HX-Refresh": "true"} if doc.status not in BUSY else {}
        return render(
            request, "documents/_status.html", headers=headers, kb_id=kb_id, doc=doc, poll=POLL_SECONDS
        )

    @get("/documents/{doc_id:str}/edit", summary="The form to edit a document")
    async def edit_page(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
    ) -> Template:
        doc = await document_service.get(kb_id, doc_id)
        content = await document_service.editable_content(kb_id, doc_id)
        values = {
            "title": doc.title,
            "description": doc.description,
            "content": content or "",
            "content_type": doc.source_kind,
        }
        return _edit_form(request, kb, doc, values=values, editable=content is not None, errors={})

    @post("/documents/{doc_id:str}/edit", summary="Save a document's title, description or content")
    async def update(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
    ) -> Response[Any]:
        doc = await document_service.get(kb_id, doc_id)
        current = await document_service.editable_content(kb_id, doc_id)
        values = form_values(await request.form(), _TEXT_FIELDS)
        data: dict[str, Any] = {"title": values["title"], "description": values["description"]}
        # Content is sent on only when it changed: an untouched text box re-indexes nothing.
        content = textarea_text(values["content"])
        if current is not None and (content != current or values["content_type"] != doc.source_kind):
            data["content"] = content
            data["content_type"] = values["content_type"] or None
        update, errors = validated(DocumentUpdate, data)
        status_code = None
        if update is not None:
            try:
                await document_service.update(kb_id, doc_id, update)
            except NotFound:
                raise
            except AppError as exc:
                errors, status_code = app_error_fields(exc), exc.status_code
        if errors:
            editable = current is not None
            return _edit_form(
                request, kb, doc, values=values, editable=editable, errors=errors, status_code=status_code
            )
        return redirect(f"/console/knowledge/{kb_id}/documents/{doc_id}", done="doc-updated")

    @post("/documents/{doc_id:str}/sync", summary="Fetch a URL document's page again now")
    async def sync(
        self,
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
    ) -> Response[Any]:
        await document_service.sync(kb_id, doc_id)
        return redirect(f"/console/knowledge/{kb_id}/documents/{doc_id}", done="doc-sync")

    @get("/documents/{doc_id:str}/delete", summary="Confirm deleting a document")
    async def delete_page(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        kb: NamedDependency[KnowledgeBaseRead],
        document_service: NamedDependency[DocumentService],
    ) -> Template:
        doc = await document_service.get(kb_id, doc_id)
        return render(request, "documents/delete.html", kb=kb, doc=doc)

    @post("/documents/{doc_id:str}/delete", summary="Delete a document and its chunks")
    async def delete(
        self,
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
    ) -> Response[Any]:
        await document_service.delete(kb_id, doc_id)
        return redirect(f"/console/knowledge/{kb_id}", done="doc-deleted")


async def _table(service: DocumentService, kb_id: uuid.UUID, page: int) -> dict[str, Any]:
    found = await service.newest_page(kb_id, limit=DOCUMENTS_PER_PAGE, offset=(page - 1) * DOCUMENTS_PER_PAGE)
    return {
        "documents": found.items,
        "pager": Pager(page=page, size=DOCUMENTS_PER_PAGE, total=found.total),
        "poll": POLL_SECONDS if busy(found.items) else None,
    }


async def _upload_one(
    service: DocumentService, kb_id: uuid.UUID, upload: UploadFile, *, allow_duplicate: bool
) -> tuple[str, DocumentRead | None, str | None]:
    """One file of a multi-file upload: (its name, the document, or why it was refused).
    Each file is its own transaction: one refused file leaves the others added."""
    name = upload.filename or "unnamed file"
    if "\x00" in name:
        return name.replace("\x00", ""), None, "The file name contains a NUL character."
    data = await upload.read()
    limit = service.limits.max_upload_bytes
    if len(data) > limit:
        return name, None, f"The file is larger than the limit of {size_text(limit)}."
    try:
        doc = await service.create_upload(
            kb_id,
            filename=name,
            content_type=upload.content_type,
            data=data,
            title=None,
            description="",
            allow_duplicate=allow_duplicate,
        )
    except AppError as exc:
        await service.session.rollback()
        return name, None, exc.detail
    return name, doc, None


_ADD_FORMS = ("upload", "url", "text")
# The fields of the text form, which the edit form shares.
_TEXT_FIELDS = ("title", "description", "content", "content_type")


def _allow_duplicate(form: FormMultiDict) -> bool:
    """Ticked after a refusal, to add a document whose content the KB already holds."""
    return form_text(form, "allow_duplicate") == "1"


def _add_forms(
    request: Request[Any, Any, Any],
    kb: KnowledgeBaseRead,
    *,
    form: str | None = None,
    values: dict[str, str] | None = None,
    errors: FieldErrors | None = None,
    status_code: int | None = None,
) -> Template:
    """The three ways to add documents on one page; ``form`` names the one whose values
    and errors are shown again."""
    blank = {
        "url": "",
        "title": "",
        "description": "",
        "sync_interval_s": "",
        "content": "",
        "content_type": "text",
    }
    shown = {name: {**blank, **(values or {})} if name == form else blank for name in _ADD_FORMS}
    return render(
        request,
        "documents/new.html",
        status_code=status_code or (422 if errors else 200),
        kb=kb,
        values=shown,
        errors={name: (errors or {}) if name == form else {} for name in _ADD_FORMS},
        content_types=CONTENT_TYPES,
        sync_intervals=SYNC_INTERVALS,
        max_upload_mb=request.app.state.settings.limits.max_upload_bytes // (1024 * 1024),
    )


def _edit_form(
    request: Request[Any, Any, Any],
    kb: KnowledgeBaseRead,
    doc: DocumentRead,
    *,
    values: dict[str, str],
    editable: bool,
    errors: FieldErrors,
    status_code: int | None = None,
) -> Template:
    return render(
        request,
        "documents/edit.html",
        status_code=status_code or (422 if errors else 200),
        kb=kb,
        doc=doc,
        values=values,
        editable=editable,
        errors=errors,
        content_types=CONTENT_TYPES,
    )
