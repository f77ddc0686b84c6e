"""Documents: accept content, record it, and queue it for ingestion.

Nothing here parses or embeds; the ingestion worker does that out of band, so an upload
answers at once with the document ``pending``.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from app.config import LimitSettings
from app.db.base import utcnow
from app.documents.attributes import DocumentAttributesIn, availability, check_window
from app.documents.models import Document
from app.documents.paths import InvalidPath, normalise_path
from app.documents.repository import DocumentRepository
from app.documents.schemas import (
    BulkCounts,
    BulkDelete,
    BulkDeleteItem,
    BulkDeleteResult,
    BulkStatus,
    BulkUploadItem,
    BulkUploadResult,
    ChunkRead,
    DocumentCreateText,
    DocumentCreateUrl,
    DocumentRead,
    DocumentUpdate,
    ExistingDocument,
    Progress,
)
from app.errors import (
    AppError,
    BadRequest,
    Conflict,
    NotFound,
    PayloadTooLarge,
    QuotaExceeded,
    UnsupportedMediaType,
    ValidationFailed,
    size_text,
)
from app.ingestion.extract import UnsupportedType, sniff_kind
from app.ingestion.fetch import BlockedURL, github_raw_url
from app.knowledge.repository import KnowledgeRepository
from app.schemas import Page

DOC_NOT_FOUND = "document not found"
_TEXT_KINDS = frozenset({"text", "markdown", "html", "csv"})
UrlValidator = Callable[[str], Awaitable[None]]


class DuplicateDocument(Conflict):
    """The KB already holds this content, or this URL: adding it again would make every
    answer from it come twice among the sources."""

    code = "duplicate_document"

    def __init__(self, existing: Document, *, same: Literal["content", "url", "path"]) -> None:
        what = {"content": "with this content", "url": "from this URL", "path": "at this path"}[same]
        # One path is one document (a unique index): allow_duplicate cannot add a second.
        remedy = (
            "upload it in a bulk upload to replace that document's content"
            if same == "path"
            else "send allow_duplicate=true to add it anyway"
        )
        super().__init__(
            f"this knowledge base already holds a document {what}: {existing.id} "
            f"('{existing.title}', {existing.status}); {remedy}"
        )
        self.existing = ExistingDocument(id=existing.id, title=existing.title, status=existing.status)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_content_hash(stream: io.BufferedReader) -> str:
    """content_hash of what ``stream`` holds, read in blocks rather than whole."""
    return hashlib.file_digest(stream, "sha256").hexdigest()


@dataclass(frozen=True, slots=True)
class UploadedFile:
    """One file of a bulk upload, as the HTTP layer read it."""

    filename: str | None
    content_type: str | None
    data: bytes


def to_read(doc: Document) -> DocumentRead:
    return DocumentRead(
        id=doc.id,
        kb_id=doc.kb_id,
        title=doc.title,
        description=doc.description,
        source_kind=doc.source_kind,
        source_path=doc.source_path,
        source_url=doc.source_url,
        file_name=doc.file_name,
        content_hash=doc.content_hash,
        status=doc.status,
        error=doc.error,
        chunk_count=doc.chunk_count,
        progress=Progress(done=doc.progress_done, total=doc.progress_total),
        pages_total=doc.pages_total,
        pages_skipped=doc.pages_skipped,
        attempts=doc.attempts,
        created_at=doc.created_at,
        updated_at=doc.updated_at,
        indexed_at=doc.indexed_at,
        tags=doc.tags,
        attributes=doc.attributes,
        effective_from=doc.effective_from,
        expires_at=doc.expires_at,
        availability=availability(doc.effective_from, doc.expires_at, utcnow()),
    )


def _with_attributes(doc: Document, data: DocumentAttributesIn) -> Document:
    doc.tags, doc.attributes = list(data.tags), dict(data.attributes)
    doc.effective_from, doc.expires_at = data.effective_from, data.expires_at
    return doc


def _update_attributes(doc: Document, data: DocumentUpdate) -> None:
    """Tags, attributes and dates given in the update replace the stored ones (a trigger
    moves the KB's content version: migration 0020); the window is checked as it will be."""
    sent = data.model_fields_set
    effective_from = data.effective_from if "effective_from" in sent else doc.effective_from
    expires_at = data.expires_at if "expires_at" in sent else doc.expires_at
    try:
        check_window(effective_from, expires_at)
    except ValueError as exc:
        raise ValidationFailed(
            "invalid request body: expires_at",
            extra=[{"field": "expires_at", "message": "must be after effective_from"}],
        ) from exc
    if data.tags is not None:
        doc.tags = list(data.tags)
    if data.attributes is not None:
        doc.attributes = dict(data.attributes)
    doc.effective_from, doc.expires_at = effective_from, expires_at


def _requeue(doc: Document) -> None:
    """Queue a document for any worker to take at once. A worker still on the previous
    version loses its lease here, and every write it would finish with is fenced by
    lease_owner; keeping the lease left the new version waiting for it to expire (lease_s,
    two minutes by default). It is read from its source as it is now (a URL is fetched), even
    if it was waiting to be re-read from its stored copy."""
    doc.status, doc.error, doc.attempts, doc.reread = "pending", None, 0, False
    doc.lease_owner = doc.lease_expires_at = None
    doc.progress_done = doc.progress_total = 0


class DocumentService:
    def __init__(
        self,
        session: AsyncSession,
        org_id: uuid.UUID,
        *,
        validate_url: UrlValidator,
        on_enqueued: Callable[[], None] | None = None,
        default_sync_interval_s: int = 0,
        limits: LimitSettings | None = None,
    ) -> None:
        self.limits = limits or LimitSettings()
        self.session = session
        self.repo = DocumentRepository(session, org_id)
        self.kbs = KnowledgeRepository(session, org_id)
        self.validate_url = validate_url
        self.on_enqueued = on_enqueued
        self.default_sync_interval_s = default_sync_interval_s

    async def _require_kb(self, kb_id: uuid.UUID) -> None:
        if not await self.kbs.exists(kb_id):
            raise NotFound("knowledge base not found")

    async def _check_quota(self, kb_id: uuid.UUID, new_bytes: int, *, new_document: bool) -> None:
        # Counting and then storing let concurrent uploads all pass (probe: 11 documents in a
        # KB limited to 3). The locks taken here are held until the commit that stores, and
        # always in this order, organisation before KB, so two requests cannot deadlock.
        if new_bytes:
            await self.repo.lock_storage()
        if new_document and not await self.kbs.lock(kb_id):
            raise NotFound("knowledge base not found")
        if new_document and await self.repo.count_in_kb(kb_id) >= self.limits.documents_per_kb:
            raise QuotaExceeded(
                f"this knowledge base holds the maximum of {self.limits.documents_per_kb} documents"
            )
        if new_bytes and await self.repo.stored_bytes() + new_bytes > self.limits.org_storage_bytes:
            raise QuotaExceeded(
                f"the organisation's storage quota of {self.limits.org_storage_bytes // 1024**2} MB"
                " would be exceeded"
            )

    async def _queued(self, doc: Document, *, allow_duplicate: bool) -> DocumentRead:
        doc.size_bytes = len(doc.original or b"")
        await self._check_quota(doc.kb_id, doc.size_bytes, new_document=True)
        if not allow_duplicate:
            # After _check_quota: the KB's row stays locked until the commit below, so two
            # copies in flight together are looked up one after the other and the second
            # finds the first. (Not a unique index: duplicates may be allowed, and the worker
            # sets a URL document's hash to whatever its page returns.) A URL's content is
            # not known before it is fetched: the URL itself is what repeats.
            existing = await self.repo.find_duplicate(
                doc.kb_id, content_hash=doc.content_hash, source_url=doc.source_url
            )
            if existing is not None:
                raise DuplicateDocument(existing, same="url" if doc.source_url is not None else "content")
        if doc.source_path is not None:
            existing = await self.repo.get_by_path(doc.kb_id, doc.source_path)
            if existing is not None:
                raise DuplicateDocument(existing, same="path")
        self.repo.add(doc)
        await self.session.commit()
        if self.on_enqueued:
            self.on_enqueued()
        return to_read(doc)

    async def create_text(
        self, kb_id: uuid.UUID, data: DocumentCreateText, *, allow_duplicate: bool = False
    ) -> DocumentRead:
        await self._require_kb(kb_id)
        raw = data.content.encode()
        return await self._queued(
            _with_attributes(
                Document(
                    org_id=self.repo.org_id,
                    kb_id=kb_id,
                    title=data.title,
                    description=data.description,
                    source_kind=data.content_type,
                    source_path=data.source_path,
                    original=raw,
                    content_hash=content_hash(raw),
                ),
                data,
            ),
            allow_duplicate=allow_duplicate,
        )

    async def create_upload(
        self,
        kb_id: uuid.UUID,
        *,
        filename: str | None,
        content_type: str | None,
        data: bytes,
        title: str | None,
        description: str,
        source_path: str | None = None,
        attributes: DocumentAttributesIn | None = None,
        allow_duplicate: bool = False,
    ) -> DocumentRead:
        await self._require_kb(kb_id)
        kind = _file_kind(filename, content_type, data)
        name = _base_name(filename)
        return await self._queued(
            _with_attributes(
                Document(
                    org_id=self.repo.org_id,
                    kb_id=kb_id,
                    title=(title or _title_from(name))[:300],
                    description=description,
                    source_kind=kind,
                    source_path=source_path,
                    file_name=name,
                    original=data,
                    content_hash=content_hash(data),
                ),
                attributes or DocumentAttributesIn(),
            ),
            allow_duplicate=allow_duplicate,
        )

    async def create_url(
        self, kb_id: uuid.UUID, data: DocumentCreateUrl, *, allow_duplicate: bool = False
    ) -> DocumentRead:
        await self._require_kb(kb_id)
        url = github_raw_url(data.url)
        try:
            await self.validate_url(url)
        except BlockedURL as exc:
            raise BadRequest(f"this URL cannot be fetched: {exc}") from exc
        interval = data.sync_interval_s if data.sync_interval_s is not None else self.default_sync_interval_s
        return await self._queued(
            _with_attributes(
                Document(
                    org_id=self.repo.org_id,
                    kb_id=kb_id,
                    # The page title replaces this placeholder once fetched, unless one was given.
                    title=data.title or url[:300],
                    description=data.description,
                    source_kind="url",
                    source_url=url,
                    sync_interval_s=interval or None,
                ),
                data,
            ),
            allow_duplicate=allow_duplicate,
        )

    async def page(
        self, kb_id: uuid.UUID, *, limit: int, offset: int, source_path: str | None = None
    ) -> Page[DocumentRead]:
        """A page of the KB's documents; with ``source_path``, the one at that path (as
        normalised), and none for a path no document can have."""
        await self._require_kb(kb_id)
        path = None
        if source_path is not None:
            try:
                path = normalise_path(source_path)
            except InvalidPath:
                return Page(items=[], total=0, limit=limit, offset=offset)
        docs, total = await self.repo.page(kb_id, limit=limit, offset=offset, source_path=path)
        return Page(items=[to_read(d) for d in docs], total=total, limit=limit, offset=offset)

    async def newest_page(self, kb_id: uuid.UUID, *, limit: int, offset: int) -> Page[DocumentRead]:
        """The KB's documents, newest first (the console's list), in two statements whatever
        the page holds."""
        await self._require_kb(kb_id)
        rows, total = await self.repo.page_for_kb(kb_id, limit=limit, offset=offset)
        return Page(items=[to_read(d) for d in rows], total=total, limit=limit, offset=offset)

    async def editable_content(self, kb_id: uuid.UUID, doc_id: uuid.UUID) -> str | None:
        """The content as it was given, for a document whose content can be replaced (text,
        Markdown, HTML); None for a PDF or a web page, whose content is not edited as text."""
        doc = await self.repo.get(kb_id, doc_id, with_content=True)
        if doc is None:
            raise NotFound(DOC_NOT_FOUND)
        if doc.source_kind not in ("text", "markdown", "html") or doc.original is None:
            return None
        return doc.original.decode("utf-8", errors="replace")

    async def get(self, kb_id: uuid.UUID, doc_id: uuid.UUID) -> DocumentRead:
        doc = await self.repo.get(kb_id, doc_id)
        if doc is None:
            raise NotFound(DOC_NOT_FOUND)
        return to_read(doc)

    async def chunks(
        self, kb_id: uuid.UUID, doc_id: uuid.UUID, *, limit: int, offset: int
    ) -> Page[ChunkRead]:
        """What the document was indexed as, in order: empty until it is first ready."""
        if await self.repo.get(kb_id, doc_id) is None:
            raise NotFound(DOC_NOT_FOUND)
        rows, total = await self.repo.chunk_page(kb_id, doc_id, limit=limit, offset=offset)
        return Page(
            items=[ChunkRead.model_validate(r) for r in rows], total=total, limit=limit, offset=offset
        )

    async def update(self, kb_id: uuid.UUID, doc_id: uuid.UUID, data: DocumentUpdate) -> DocumentRead:
        if data.content is not None:
            # New content may need more storage. Locks go organisation first, then KB or
            # document, so the quota lock is taken before the document's row lock.
            await self.repo.lock_storage()
        if data.source_path is not None:
            # The KB's lock orders this move with bulk uploads of the same path.
            await self.kbs.lock(kb_id)
        doc = await self.repo.get(kb_id, doc_id, for_update=True)
        if doc is None:
            raise NotFound(DOC_NOT_FOUND)
        if data.source_path is not None and data.source_path != doc.source_path:
            if doc.source_kind == "url":
                raise Conflict("a URL document comes from its URL, not from a file: it takes no path")
            holder = await self.repo.get_by_path(kb_id, data.source_path)
            if holder is not None:
                raise DuplicateDocument(holder, same="path")
            doc.source_path = data.source_path
        if data.title is not None and data.title != doc.title:
            # Answers name their sources by title: a trigger moves the KB's content version
            # (migration 0009), so no cached answer keeps the old name.
            doc.title = data.title
        if data.description is not None:
            doc.description = data.description
        _update_attributes(doc, data)
        requeue = False
        if data.content is not None:
            if doc.source_kind == "url":
                raise Conflict("the content of a URL document comes from its page; use .../sync instead")
            raw = data.content.encode()
            # JSON content is text: a PDF's or an Office file's replacement is read as plain text.
            kind = data.content_type or (doc.source_kind if doc.source_kind in _TEXT_KINDS else "text")
            if content_hash(raw) != doc.content_hash or kind != doc.source_kind:
                await self._check_quota(kb_id, max(0, len(raw) - doc.size_bytes), new_document=False)
                doc.original, doc.content_hash, doc.source_kind = raw, content_hash(raw), kind
                doc.size_bytes = len(raw)
                requeue = True
        if requeue:
            # The old chunks keep answering until the worker swaps the new ones in.
            _requeue(doc)
        doc.updated_at = utcnow()
        await self.session.commit()
        if requeue and self.on_enqueued:
            self.on_enqueued()
        return to_read(doc)

    async def sync(self, kb_id: uuid.UUID, doc_id: uuid.UUID) -> DocumentRead:
        doc = await self.repo.get(kb_id, doc_id, for_update=True)
        if doc is None:
            raise NotFound(DOC_NOT_FOUND)
        if doc.source_kind != "url":
            raise Conflict("only URL documents can be re-synced")
        if doc.status not in ("pending", "processing") or doc.reread:
            # Queued to be re-read from its stored copy: fetched instead, as asked.
            _requeue(doc)
            doc.updated_at = utcnow()
        await self.session.commit()
        if self.on_enqueued:
            self.on_enqueued()
        return to_read(doc)

    async def delete(self, kb_id: uuid.UUID, doc_id: uuid.UUID) -> None:
        doc = await self.repo.get(kb_id, doc_id, for_update=True)
        if doc is None:
            raise NotFound(DOC_NOT_FOUND)
        await self.repo.delete(kb_id, doc_id)
        await self.session.commit()

    async def bulk_upload(
        self, kb_id: uuid.UUID, files: Sequence[UploadedFile], *, use_paths: bool, allow_duplicate: bool
    ) -> BulkUploadResult:
        """Add many files, each on its own: one that fails (its type, its size, a quota, a
        duplicate) is reported in its item and leaves the others as they are. With
        ``use_paths`` each file's name is its path in the synced folder, and a path the KB
        already holds is that document, updated or left unchanged."""
        await self._require_kb(kb_id)
        items: list[BulkUploadItem] = []
        for index, file in enumerate(files):
            path: str | None = None
            status: BulkStatus
            try:
                if file.filename and "\x00" in file.filename:
                    # The name is stored: PostgreSQL text cannot hold NUL.
                    raise ValidationFailed("the file name must not contain NUL characters")
                if use_paths:
                    path = _path_of(file.filename)
                    status, read = await self._upsert_path(kb_id, path, file, allow_duplicate=allow_duplicate)
                else:
                    status = "created"
                    read = await self.create_upload(
                        kb_id,
                        filename=file.filename,
                        content_type=file.content_type,
                        data=file.data,
                        title=None,
                        description="",
                        allow_duplicate=allow_duplicate,
                    )
                item = BulkUploadItem(
                    index=index, path=path, status=status, document=read, error=None, detail=None
                )
            except AppError as exc:
                # Only this file's writes are undone: those before it are committed already.
                await self.session.rollback()
                item = BulkUploadItem(
                    index=index, path=path, status="failed", document=None, error=exc.code, detail=exc.detail
                )
            items.append(item)
        counts: Counter[str] = Counter(i.status for i in items)
        return BulkUploadResult(items=items, counts=BulkCounts(**counts))

    async def _upsert_path(
        self, kb_id: uuid.UUID, path: str, file: UploadedFile, *, allow_duplicate: bool
    ) -> tuple[Literal["created", "updated", "unchanged"], DocumentRead]:
        if len(file.data) > self.limits.max_upload_bytes:
            raise PayloadTooLarge(
                f"the file is larger than the limit of {size_text(self.limits.max_upload_bytes)}"
            )
        kind = _file_kind(path, file.content_type, file.data)
        name = _base_name(path)
        digest = content_hash(file.data)
        # Organisation, then KB, then document, as everywhere: the KB's lock also makes the
        # lookup below and the insert after it one step for concurrent uploads of one path.
        await self.repo.lock_storage()
        if not await self.kbs.lock(kb_id):
            raise NotFound("knowledge base not found")
        doc = await self.repo.get_by_path(kb_id, path, for_update=True)
        if doc is None:
            created = Document(
                org_id=self.repo.org_id,
                kb_id=kb_id,
                title=_title_from(name)[:300],
                source_kind=kind,
                source_path=path,
                file_name=name,
                original=file.data,
                content_hash=digest,
            )
            return "created", await self._queued(created, allow_duplicate=allow_duplicate)
        # A failed document is tried again even with the same bytes: its failure may have
        # been the moment's (a quota, a provider), and a sync means "make this current".
        if doc.content_hash == digest and doc.source_kind == kind and doc.status != "failed":
            read = to_read(doc)
            await self.session.commit()  # releases the locks; nothing was written
            return "unchanged", read
        await self._check_quota(kb_id, max(0, len(file.data) - doc.size_bytes), new_document=False)
        doc.original, doc.content_hash, doc.source_kind = file.data, digest, kind
        doc.size_bytes, doc.file_name = len(file.data), name
        # The old chunks keep answering until the worker swaps the new ones in.
        _requeue(doc)
        doc.updated_at = utcnow()
        await self.session.commit()
        if self.on_enqueued:
            self.on_enqueued()
        return "updated", to_read(doc)

    async def bulk_delete(self, kb_id: uuid.UUID, data: BulkDelete) -> BulkDeleteResult:
        """Delete documents by id and by path in one transaction; ids and paths that name no
        document of this KB (another organisation's included) are ``not_found``."""
        if len(data.ids) + len(data.paths) > self.limits.bulk_max_files:
            raise ValidationFailed(
                f"at most {self.limits.bulk_max_files} ids and paths in one request",
                extra=[{"field": "ids", "message": "too many ids and paths"}],
            )
        await self._require_kb(kb_id)
        by_path = await self.repo.ids_by_path(kb_id, list(data.paths)) if data.paths else {}
        wanted = [*data.ids, *by_path.values()]
        deleted = await self.repo.delete_many(kb_id, wanted) if wanted else set()
        await self.session.commit()
        items = [
            BulkDeleteItem(id=i, path=None, status="deleted" if i in deleted else "not_found")
            for i in data.ids
        ]
        items += [
            BulkDeleteItem(
                id=by_path.get(p), path=p, status="deleted" if by_path.get(p) in deleted else "not_found"
            )
            for p in data.paths
        ]
        found = sum(1 for i in items if i.status == "deleted")
        return BulkDeleteResult(items=items, deleted=found, not_found=len(items) - found)


def _file_kind(filename: str | None, content_type: str | None, data: bytes) -> str:
    # Before the type is sniffed: an empty .pdf is empty, not "not a PDF".
    if not data:
        raise BadRequest("the uploaded file is empty")
    try:
        return sniff_kind(filename, content_type, data)
    except UnsupportedType as exc:
        raise UnsupportedMediaType(str(exc)) from exc


def _base_name(filename: str | None) -> str | None:
    return (filename or "").replace("\\", "/").rsplit("/", 1)[-1][:255] or None


def _title_from(name: str | None) -> str:
    return (name.rsplit(".", 1)[0] if name else "") or "Untitled"


def _path_of(filename: str | None) -> str:
    if not filename:
        raise ValidationFailed("a file of a bulk upload needs its path as its file name")
    try:
        return normalise_path(filename)
    except InvalidPath as exc:
        raise ValidationFailed(str(exc)) from None
