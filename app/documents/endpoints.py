from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, post, put
from litestar.datastructures import State, UploadFile
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal, admin_only
from app.documents.attributes import DocumentAttributesIn, form_attributes
from app.documents.paths import MAX_PATH_CHARS
from app.documents.schemas import (
    BulkDelete,
    BulkDeleteResult,
    BulkUploadForm,
    BulkUploadResult,
    ChunkRead,
    DocumentCreateText,
    DocumentCreateUrl,
    DocumentRead,
    DocumentUpdate,
    DocumentUploadForm,
    DocumentUploadMeta,
)
from app.documents.service import DocumentService, DuplicateDocument, UploadedFile
from app.errors import PayloadTooLarge, UnsupportedMediaType, ValidationFailed, size_text
from app.exception_handlers import app_error
from app.http import Limit, Offset, parse_json, validate_obj
from app.schemas import Page

_UPLOAD_FIELDS = set(DocumentUploadForm.model_fields)
_ATTRIBUTE_FIELDS = set(DocumentAttributesIn.model_fields)

# A query parameter, so the three forms of the body (two JSON, one multipart) take it alike.
AllowDuplicate = Annotated[
    bool,
    QueryParameter(
        description="Add the document even if the knowledge base already holds the same content "
        "(or, for a URL, the same URL); otherwise that is a 409 `duplicate_document`."
    ),
]


UsePaths = Annotated[
    bool,
    QueryParameter(
        description="Take each file part's file name as its path in the synced folder (its "
        "`source_path`), so that a path the knowledge base holds is updated rather than added. "
        "false = plain uploads, as one by one."
    ),
]

BULK_DESCRIPTION = """multipart/form-data with one `file` part per file (up to `limits.bulk_max_files`,
100 by default; the whole body within `limits.max_upload_bytes`, 20 MB by default). Each part's
**file name is the file's relative path** in the folder being mirrored, as browsers send a folder
upload: `Content-Disposition: form-data; name="file"; filename="guides/setup.md"`. The path is
normalised (forward slashes, no `.` segments; `..` and absolute paths fail the file) and becomes
the document's `source_path`, unique within the knowledge base.

Each file is handled on its own and reported in `items`, in the order sent:
`created` (a new path), `updated` (the path's document gets the new bytes and is indexed again),
`unchanged` (the path's document already holds these bytes: nothing is indexed again; a `failed`
document is tried again instead), or `failed` with the `error` code and `detail` a single upload
would have answered (type, size, quota, `duplicate_document` when another document already holds
the same bytes unless `allow_duplicate=true`). One failed file leaves the others as they are.

With `use_paths=false` the file names are only names and every file is a new document."""


def duplicate_document(request: Request[Any, Any, Any], exc: DuplicateDocument) -> Response[Any]:
    """The service's error body, plus the existing document for a client to act on."""
    response = app_error(request, exc)
    response.content = {**response.content, "existing_document": exc.existing.model_dump(mode="json")}
    return response


def provide_document_service(
    state: State, session: NamedDependency[AsyncSession], principal: NamedDependency[Principal]
) -> DocumentService:
    return DocumentService(
        session,
        principal.org_id,
        validate_url=state.validate_url,
        on_enqueued=state.wake_workers,
        default_sync_interval_s=state.settings.ingestion.url_resync_s,
        limits=state.settings.limits,
    )


class DocumentController(Controller):
    path = "/api/knowledge/{kb_id:str}/documents"
    tags = ["documents"]
    guards = [admin_only]
    dependencies = {"document_service": Provide(provide_document_service, sync_to_thread=False)}
    exception_handlers = {DuplicateDocument: duplicate_document}

    @post(
        "/",
        status_code=HTTP_202_ACCEPTED,
        summary="Add a document (JSON text, JSON URL, or multipart file upload)",
        # The handler reads the body itself, in one of three forms: the schema names them.
        opt={
            "request_body": {
                "application/json": (DocumentCreateText, DocumentCreateUrl),
                "multipart/form-data": (DocumentUploadForm,),
            }
        },
        description=(
            "Three forms: JSON `{title, description?, content, content_type?: text|markdown|html}`; "
            "JSON `{url, title?, description?, sync_interval_s?}`; or multipart/form-data with a `file` "
            "(.txt .md .html .pdf .docx .pptx .xlsx .csv) and optional `title`, `description`. "
            "Answers 202 with the document in status `pending`; ingestion runs in the background.\n\n"
            "Each form also takes `tags`, `attributes`, `effective_from` and `expires_at` (in a multipart "
            "form: tags comma-separated, attributes as JSON text): what query_knowledge's filters select "
            'by, and when the document may answer (docs/INTEGRATION.md, "Filters and freshness").\n\n'
            "Content the knowledge base already holds (the same bytes; for a URL, the same URL) is "
            "refused with a 409 whose `error` is `duplicate_document` and whose "
            "`existing_document` is `{id, title, status}` of the document holding it, unless "
            "`allow_duplicate=true` is sent in the query string."
        ),
    )
    async def create_document(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
        allow_duplicate: AllowDuplicate = False,
    ) -> DocumentRead:
        limit = document_service.limits.max_upload_bytes
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit + 64 * 1024:
            raise PayloadTooLarge(f"the upload is larger than the limit of {size_text(limit)}")
        media_type = request.content_type[0]
        if media_type == "multipart/form-data":
            return await _upload(document_service, request, kb_id, limit, allow_duplicate)
        if media_type != "application/json":
            raise UnsupportedMediaType("send application/json or multipart/form-data")
        obj = parse_json(await _read_capped(request, limit))
        # A body with "url" is a web page to fetch; anything else must be inline content.
        if isinstance(obj, dict) and "url" in obj:
            return await document_service.create_url(
                kb_id, validate_obj(DocumentCreateUrl, obj), allow_duplicate=allow_duplicate
            )
        return await document_service.create_text(
            kb_id, validate_obj(DocumentCreateText, obj), allow_duplicate=allow_duplicate
        )

    @get("/", summary="List a knowledge base's documents (paginated, oldest first)")
    async def list_documents(
        self,
        kb_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
        limit: Limit = 50,
        offset: Offset = 0,
        source_path: Annotated[
            str | None,
            QueryParameter(
                description="Only the document at this path, normalised as stored (a path no "
                "document can have, such as `../x`, finds none).",
                max_length=MAX_PATH_CHARS,
            ),
        ] = None,
    ) -> Page[DocumentRead]:
        return await document_service.page(kb_id, limit=limit, offset=offset, source_path=source_path)

    @post(
        "/bulk",
        status_code=HTTP_200_OK,
        summary="Add or update many files in one request, with a result per file",
        opt={"request_body": {"multipart/form-data": (BulkUploadForm,)}},
        description=BULK_DESCRIPTION,
    )
    async def bulk_upload(
        self,
        request: Request[Any, Any, Any],
        kb_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
        use_paths: UsePaths = True,
        allow_duplicate: AllowDuplicate = False,
    ) -> BulkUploadResult:
        if request.content_type[0] != "multipart/form-data":
            raise UnsupportedMediaType("send multipart/form-data with one 'file' part per file")
        files = await _bulk_files(request, document_service.limits.bulk_max_files)
        return await document_service.bulk_upload(
            kb_id, files, use_paths=use_paths, allow_duplicate=allow_duplicate
        )

    @post(
        "/bulk-delete",
        status_code=HTTP_200_OK,
        summary="Delete many documents by id and/or path, with a result per id and path",
        description="JSON `{ids?: [uuid], paths?: [string]}`, at most `limits.bulk_max_files` in all. "
        "Each is `deleted` or `not_found` (ids of other knowledge bases and organisations included); "
        "all are deleted in one transaction.",
    )
    async def bulk_delete(
        self,
        kb_id: FromPath[uuid.UUID],
        data: JSONBody[BulkDelete],
        document_service: NamedDependency[DocumentService],
    ) -> BulkDeleteResult:
        return await document_service.bulk_delete(kb_id, data)

    @get("/{doc_id:str}", summary="One document with status, error, progress and chunk count")
    async def get_document(
        self,
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
    ) -> DocumentRead:
        return await document_service.get(kb_id, doc_id)

    @get("/{doc_id:str}/chunks", summary="The chunks a document was indexed as, in order (paginated)")
    async def list_chunks(
        self,
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[ChunkRead]:
        return await document_service.chunks(kb_id, doc_id, limit=limit, offset=offset)

    @put(
        "/{doc_id:str}",
        summary="Update title, description, content (re-indexed), tags, attributes or validity window",
    )
    async def update_document(
        self,
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        data: JSONBody[DocumentUpdate],
        document_service: NamedDependency[DocumentService],
    ) -> DocumentRead:
        return await document_service.update(kb_id, doc_id, data)

    @post("/{doc_id:str}/sync", status_code=HTTP_202_ACCEPTED, summary="Re-fetch a URL document now")
    async def sync_document(
        self,
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
    ) -> DocumentRead:
        return await document_service.sync(kb_id, doc_id)

    @delete("/{doc_id:str}", summary="Delete a document and its chunks")
    async def delete_document(
        self,
        kb_id: FromPath[uuid.UUID],
        doc_id: FromPath[uuid.UUID],
        document_service: NamedDependency[DocumentService],
    ) -> None:
        await document_service.delete(kb_id, doc_id)


async def _read_capped(request: Request[Any, Any, Any], limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the request body is larger than the limit of {size_text(limit)}")
        chunks.append(chunk)
    return b"".join(chunks)


async def _upload(
    service: DocumentService,
    request: Request[Any, Any, Any],
    kb_id: uuid.UUID,
    limit: int,
    allow_duplicate: bool,
) -> DocumentRead:
    form = await request.form()
    unknown = set(form.keys()) - _UPLOAD_FIELDS
    if unknown:
        raise ValidationFailed(
            f"unknown form fields: {', '.join(sorted(unknown))}",
            extra=[{"field": f, "message": "not allowed"} for f in sorted(unknown)],
        )
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise ValidationFailed(
            "a multipart upload needs a 'file' field", extra=[{"field": "file", "message": "required"}]
        )
    if upload.filename and "\x00" in upload.filename:
        # The name is stored (and may become the title): PostgreSQL text cannot hold NUL.
        raise ValidationFailed(
            "invalid request body: file",
            extra=[{"field": "file", "message": "the file name must not contain NUL characters"}],
        )
    meta = validate_obj(
        DocumentUploadMeta,
        {
            **{k: v for k in ("title", "description", "source_path") if (v := form.get(k)) is not None},
            **form_attributes(form),
        },
    )
    data = await upload.read()
    if len(data) > limit:
        raise PayloadTooLarge(f"the upload is larger than the limit of {size_text(limit)}")
    return await service.create_upload(
        kb_id,
        filename=upload.filename,
        content_type=upload.content_type,
        data=data,
        title=meta.title,
        description=meta.description,
        source_path=meta.source_path,
        attributes=DocumentAttributesIn.model_validate(meta.model_dump(include=_ATTRIBUTE_FIELDS)),
        allow_duplicate=allow_duplicate,
    )


async def _bulk_files(request: Request[Any, Any, Any], max_files: int) -> list[UploadedFile]:
    """The request's files, read; the body as a whole is held to the request size limit."""
    form = await request.form()
    unknown = set(form.keys()) - {"file"}
    if unknown:
        raise ValidationFailed(
            f"unknown form fields: {', '.join(sorted(unknown))}",
            extra=[{"field": f, "message": "not allowed"} for f in sorted(unknown)],
        )
    parts = form.getall("file") if "file" in form else []
    if not parts:
        raise ValidationFailed(
            "a bulk upload needs at least one 'file' part", extra=[{"field": "file", "message": "required"}]
        )
    if len(parts) > max_files:
        raise ValidationFailed(
            f"at most {max_files} files in one bulk upload; {len(parts)} were sent",
            extra=[{"field": "file", "message": f"at most {max_files} files"}],
        )
    files = []
    for part in parts:
        if not isinstance(part, UploadFile):
            raise ValidationFailed(
                "every 'file' part must be a file (with a file name)",
                extra=[{"field": "file", "message": "not a file"}],
            )
        files.append(UploadedFile(_sent_name(part), part.content_type, await part.read()))
    return files


# A file name sent as a Windows absolute path, quoted as browsers and clients send it.
_WINDOWS_ABSOLUTE_NAME = re.compile(r'filename="((?:[A-Za-z]:\\|\\\\)[^"]*)"')
_ESCAPED = re.compile(r'(?:[^\\]|\\[\\"])*')  # every backslash escapes the next character
_ESCAPE = re.compile(r'\\([\\"])')


def _sent_name(part: UploadFile) -> str | None:
    """The file name as sent. The multipart parser keeps only the last segment of a name that
    starts like a Windows absolute path ("C:\\...", "\\\\server\\..."; Internet Explorer 6 sent
    full paths), and a bulk upload's name is its path: it must be refused as absolute, not
    taken as a file at the top of the knowledge base."""
    disposition = next((v for k, v in part.headers.items() if k.lower() == "content-disposition"), "")
    match = _WINDOWS_ABSOLUTE_NAME.search(disposition)
    if match is None:
        return part.filename
    name = match.group(1)
    # httpx and curl escape each backslash (C:\\win), browsers and urllib3 do not.
    return _ESCAPE.sub(r"\1", name) if _ESCAPED.fullmatch(name) else name
