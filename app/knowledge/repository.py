"""SQL for knowledge bases and agent assignments. Organisation scoping lives in ``_scoped``."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, func, insert, literal, select
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select

from app.documents.models import Document
from app.knowledge.models import AgentAssignment, KnowledgeBase

KB = KnowledgeBase.__table__  # type: ignore[attr-defined]
DOC = Document.__table__  # type: ignore[attr-defined]
ASSIGN = AgentAssignment.__table__  # type: ignore[attr-defined]

_document_count = select(func.count()).where(DOC.c.kb_id == KB.c.id).scalar_subquery().label("document_count")
_agent_ids = (
    select(func.coalesce(func.array_agg(ASSIGN.c.agent_id), literal([], ARRAY(UUID(as_uuid=True)))))
    .where(ASSIGN.c.kb_id == KB.c.id)
    .scalar_subquery()
    .label("agent_ids")
)


class KnowledgeRepository:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.org_id = org_id

    def _scoped(self, stmt: Select[Any]) -> Select[Any]:
        return stmt.where(KB.c.org_id == self.org_id)

    def _read_select(self) -> Select[Any]:
        return self._scoped(select(KB, _document_count, _agent_ids))

    async def page(self, *, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        rows = await self.session.execute(
            self._read_select().order_by(KB.c.created_at, KB.c.id).limit(limit).offset(offset)
        )
        total = await self.session.scalar(self._scoped(select(func.count()).select_from(KB)))
        return [dict(r._mapping) for r in rows], int(total or 0)

    async def read(self, kb_id: uuid.UUID) -> dict[str, Any] | None:
        row = (await self.session.execute(self._read_select().where(KB.c.id == kb_id))).first()
        return dict(row._mapping) if row else None

    async def get(self, kb_id: uuid.UUID, *, for_update: bool = False) -> KnowledgeBase | None:
        stmt = select(KnowledgeBase).where(
            KnowledgeBase.org_id == self.org_id,  # type: ignore[arg-type]
            KnowledgeBase.id == kb_id,  # type: ignore[arg-type]
        )
        if for_update:
            stmt = stmt.with_for_update()
        result: KnowledgeBase | None = await self.session.scalar(stmt)
        return result

    async def lock(self, kb_id: uuid.UUID) -> bool:
        """Lock the KB's row until commit, so per-KB counts checked before an insert stay true;
        False when there is no such KB. NO KEY UPDATE, not UPDATE: the foreign-key checks of
        its documents' and chunks' inserts (KEY SHARE) are not held up."""
        stmt = self._scoped(select(KB.c.id)).where(KB.c.id == kb_id).with_for_update(key_share=True)
        return bool(await self.session.scalar(stmt))

    async def exists(self, kb_id: uuid.UUID) -> bool:
        return bool(await self.session.scalar(self._scoped(select(KB.c.id)).where(KB.c.id == kb_id)))

    def add(self, kb: KnowledgeBase) -> None:
        kb.org_id = self.org_id
        self.session.add(kb)

    async def delete(self, kb_id: uuid.UUID) -> bool:
        result = await self.session.execute(delete(KB).where(KB.c.org_id == self.org_id, KB.c.id == kb_id))
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def replace_agents(self, kb_id: uuid.UUID, agent_ids: list[uuid.UUID]) -> None:
        await self.session.execute(
            delete(ASSIGN).where(ASSIGN.c.org_id == self.org_id, ASSIGN.c.kb_id == kb_id)
        )
        if agent_ids:
            await self.session.execute(
                insert(ASSIGN),
                [{"kb_id": kb_id, "agent_id": a, "org_id": self.org_id} for a in agent_ids],
            )

    async def agent_ids(self, kb_id: uuid.UUID) -> list[uuid.UUID]:
        rows = await self.session.scalars(
            select(ASSIGN.c.agent_id)
            .where(ASSIGN.c.org_id == self.org_id, ASSIGN.c.kb_id == kb_id)
            .order_by(ASSIGN.c.agent_id)
        )
        return list(rows)

    async def list_for_agent(self, agent_id: uuid.UUID) -> list[dict[str, Any]]:
        assigned = select(ASSIGN.c.kb_id).where(ASSIGN.c.org_id == self.org_id, ASSIGN.c.agent_id == agent_id)
        rows = await self.session.execute(
            self._read_select().where(KB.c.id.in_(assigned)).order_by(KB.c.created_at, KB.c.id)
        )
        return [dict(r._mapping) for r in rows]
