"""SQL for documents. Every query is scoped to the organisation (and the KB) in ``_scoped``."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import undefer
from sqlalchemy.sql import Select

from app.documents.models import Chunk, Document
from app.organisations.models import Organisation

DOC = Document.__table__  # type: ignore[attr-defined]
CHUNK = Chunk.__table__  # type: ignore[attr-defined]


class DocumentRepository:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.org_id = org_id

    def _scoped(self, stmt: Select[Any], kb_id: uuid.UUID) -> Select[Any]:
        return stmt.where(Document.org_id == self.org_id, Document.kb_id == kb_id)  # type: ignore[arg-type]

    async def list_for_kb(self, kb_id: uuid.UUID) -> list[Document]:
        rows = await self.session.scalars(
            self._scoped(select(Document), kb_id).order_by(Document.created_at, Document.id)  # type: ignore[arg-type]
        )
        return list(rows)

    async def page(
        self, kb_id: uuid.UUID, *, limit: int, offset: int, source_path: str | None = None
    ) -> tuple[list[Document], int]:
        """A page of the KB's documents, oldest first, and how many there are in all."""
        stmt = self._scoped(select(Document), kb_id)
        count = self._scoped(select(func.count()).select_from(Document), kb_id)
        if source_path is not None:
            stmt = stmt.where(DOC.c.source_path == source_path)
            count = count.where(DOC.c.source_path == source_path)
        rows = await self.session.scalars(
            stmt.order_by(DOC.c.created_at, DOC.c.id).limit(limit).offset(offset)
        )
        return list(rows), int(await self.session.scalar(count) or 0)

    async def get_by_path(
        self, kb_id: uuid.UUID, source_path: str, *, for_update: bool = False
    ) -> Document | None:
        stmt = self._scoped(select(Document), kb_id).where(DOC.c.source_path == source_path)
        if for_update:
            stmt = stmt.with_for_update()
        result: Document | None = await self.session.scalar(stmt)
        return result

    async def ids_by_path(self, kb_id: uuid.UUID, paths: list[str]) -> dict[str, uuid.UUID]:
        rows = await self.session.execute(
            self._scoped(select(DOC.c.source_path, DOC.c.id), kb_id).where(DOC.c.source_path.in_(paths))
        )
        return {r.source_path: r.id for r in rows}

    async def page_for_kb(self, kb_id: uuid.UUID, *, limit: int, offset: int) -> tuple[list[Document], int]:
        """A page of the KB's documents, newest first (ix_documents_kb), and how many it has;
        the stored content stays unloaded (deferred)."""
        rows = await self.session.scalars(
            self._scoped(select(Document), kb_id)
            .order_by(DOC.c.created_at.desc(), DOC.c.id.desc())
            .limit(limit)
            .offset(offset)
        )
        return list(rows), await self.count_in_kb(kb_id)

    async def get(
        self, kb_id: uuid.UUID, doc_id: uuid.UUID, *, for_update: bool = False, with_content: bool = False
    ) -> Document | None:
        stmt = self._scoped(select(Document), kb_id).where(Document.id == doc_id)  # type: ignore[arg-type]
        if with_content:
            stmt = stmt.options(undefer(Document.original), undefer(Document.text))  # type: ignore[arg-type]
        if for_update:
            stmt = stmt.with_for_update()
        result: Document | None = await self.session.scalar(stmt)
        return result

    async def find_duplicate(
        self, kb_id: uuid.UUID, *, content_hash: str | None = None, source_url: str | None = None
    ) -> Document | None:
        """The KB's oldest document from this URL or, given no URL, with this content."""
        same = (
            DOC.c.source_url == source_url if source_url is not None else DOC.c.content_hash == content_hash
        )
        stmt = self._scoped(select(Document), kb_id).where(same).order_by(DOC.c.created_at, DOC.c.id).limit(1)
        result: Document | None = await self.session.scalar(stmt)
        return result

    async def chunk_page(
        self, kb_id: uuid.UUID, doc_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """A document's chunks in order, and how many it has. Chunks carry their own
        organisation and KB: a document of another organisation or KB has none here."""
        scoped = (CHUNK.c.org_id == self.org_id, CHUNK.c.kb_id == kb_id, CHUNK.c.document_id == doc_id)
        rows = await self.session.execute(
            select(CHUNK.c.ordinal, CHUNK.c.text, CHUNK.c.section, CHUNK.c.page, CHUNK.c.token_count)
            .where(*scoped)
            .order_by(CHUNK.c.ordinal)  # unique per document (0001)
            .limit(limit)
            .offset(offset)
        )
        total = await self.session.scalar(select(func.count()).select_from(CHUNK).where(*scoped))
        return [dict(r._mapping) for r in rows], int(total or 0)

    async def count_in_kb(self, kb_id: uuid.UUID) -> int:
        return int(
            await self.session.scalar(self._scoped(select(func.count()).select_from(Document), kb_id)) or 0
        )

    async def stored_bytes(self) -> int:
        total = await self.session.scalar(
            select(func.coalesce(func.sum(Document.size_bytes), 0)).where(  # type: ignore[arg-type]
                Document.org_id == self.org_id  # type: ignore[arg-type]
            )
        )
        return int(total or 0)

    async def lock_storage(self) -> None:
        """Lock the organisation's row until commit: the storage quota is a sum over all its
        documents, so checking it and then storing is only safe while no other request of the
        organisation does the same. NO KEY UPDATE leaves foreign-key checks (KEY SHARE) of
        inserts elsewhere in the organisation unblocked."""
        await self.session.execute(
            select(Organisation.id)  # type: ignore[call-overload]
            .where(Organisation.id == self.org_id)
            .with_for_update(key_share=True)
        )

    def add(self, doc: Document) -> None:
        doc.org_id = self.org_id
        self.session.add(doc)

    async def delete(self, kb_id: uuid.UUID, doc_id: uuid.UUID) -> bool:
        result = await self.session.execute(
            delete(Document).where(
                Document.org_id == self.org_id,  # type: ignore[arg-type]
                Document.kb_id == kb_id,  # type: ignore[arg-type]
                Document.id == doc_id,  # type: ignore[arg-type]
            )
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def delete_many(self, kb_id: uuid.UUID, doc_ids: list[uuid.UUID]) -> set[uuid.UUID]:
        """Delete those of the ids that are the KB's documents; the ids deleted."""
        result = await self.session.execute(
            delete(DOC)
            .where(DOC.c.org_id == self.org_id, DOC.c.kb_id == kb_id, DOC.c.id.in_(doc_ids))
            .returning(DOC.c.id)
        )
        return set(result.scalars())
