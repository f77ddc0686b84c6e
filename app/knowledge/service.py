"""Knowledge bases and their agent assignments."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.repository import AgentRepository
from app.agents.service import require_known_agent
from app.config import IngestionSettings
from app.db.base import utcnow
from app.documents.repository import DocumentRepository
from app.documents.schemas import DocumentSummary
from app.errors import NotFound, ValidationFailed
from app.knowledge.models import KnowledgeBase
from app.knowledge.repository import KnowledgeRepository
from app.knowledge.schemas import (
    AgentAssignmentRead,
    KnowledgeBaseCreate,
    KnowledgeBaseDetail,
    KnowledgeBaseRead,
    KnowledgeBaseUpdate,
)
from app.schemas import Page

KB_NOT_FOUND = "knowledge base not found"


def _read(row: dict[str, Any]) -> KnowledgeBaseRead:
    return KnowledgeBaseRead.model_validate({**row, "agent_ids": sorted(row["agent_ids"] or [])})


class KnowledgeService:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID, defaults: IngestionSettings) -> None:
        self.session = session
        self.repo = KnowledgeRepository(session, org_id)
        self.docs = DocumentRepository(session, org_id)
        self.agents = AgentRepository(session, org_id)
        self.defaults = defaults

    async def page(self, *, limit: int, offset: int) -> Page[KnowledgeBaseRead]:
        rows, total = await self.repo.page(limit=limit, offset=offset)
        return Page(items=[_read(r) for r in rows], total=total, limit=limit, offset=offset)

    async def create(self, data: KnowledgeBaseCreate) -> KnowledgeBaseRead:
        await self._check_language(data.language)
        chunk_tokens = data.chunk_tokens or self.defaults.chunk_tokens
        overlap = data.chunk_overlap_tokens
        if overlap is None:
            overlap = min(self.defaults.chunk_overlap_tokens, chunk_tokens // 2)
        if overlap > chunk_tokens // 2:
            raise ValidationFailed(
                "chunk_overlap_tokens must be at most half of chunk_tokens",
                extra=[{"field": "chunk_overlap_tokens", "message": "at most half of chunk_tokens"}],
            )
        kb = KnowledgeBase(
            org_id=self.repo.org_id,
            title=data.title,
            description=data.description,
            language=data.language,
            chunk_tokens=chunk_tokens,
            chunk_overlap_tokens=overlap,
        )
        self.repo.add(kb)
        await self.session.commit()
        return await self.read(kb.id)

    async def read(self, kb_id: uuid.UUID) -> KnowledgeBaseRead:
        row = await self.repo.read(kb_id)
        if row is None:
            raise NotFound(KB_NOT_FOUND)
        return _read(row)

    async def detail(self, kb_id: uuid.UUID) -> KnowledgeBaseDetail:
        base = await self.read(kb_id)
        documents = await self.docs.list_for_kb(kb_id)
        return KnowledgeBaseDetail(
            **base.model_dump(),
            documents=[DocumentSummary.model_validate(d, from_attributes=True) for d in documents],
        )

    async def update(self, kb_id: uuid.UUID, data: KnowledgeBaseUpdate) -> KnowledgeBaseRead:
        kb = await self.repo.get(kb_id, for_update=True)
        if kb is None:
            raise NotFound(KB_NOT_FOUND)
        if data.title is not None:
            kb.title = data.title
        if data.description is not None:
            kb.description = data.description
        kb.updated_at = utcnow()
        await self.session.commit()
        return await self.read(kb_id)

    async def delete(self, kb_id: uuid.UUID) -> None:
        if not await self.repo.delete(kb_id):
            raise NotFound(KB_NOT_FOUND)
        await self.session.commit()

    async def set_agents(self, kb_id: uuid.UUID, agent_ids: list[uuid.UUID]) -> AgentAssignmentRead:
        if await self.repo.get(kb_id, for_update=True) is None:
            raise NotFound(KB_NOT_FOUND)
        unique: list[uuid.UUID] = sorted(set(agent_ids))
        await self.repo.replace_agents(kb_id, unique)
        await self.agents.register(unique)
        await self.session.commit()
        return AgentAssignmentRead(kb_id=kb_id, agent_ids=unique)

    async def for_agent(self, agent_id: uuid.UUID) -> list[KnowledgeBaseRead]:
        await require_known_agent(self.agents, agent_id)
        return [_read(r) for r in await self.repo.list_for_agent(agent_id)]

    async def _check_language(self, language: str) -> None:
        found = await self.session.scalar(
            text("SELECT 1 FROM pg_ts_config WHERE cfgname = :name"), {"name": language}
        )
        if not found:
            raise ValidationFailed(
                f"unknown text-search language '{language}'",
                extra=[{"field": "language", "message": "not a PostgreSQL text-search configuration"}],
            )
