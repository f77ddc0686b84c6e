"""What admins learn from the query log: recent calls and the knowledge gaps."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.repository import AgentRepository
from app.agents.service import require_known_agent
from app.errors import NotFound
from app.query.schemas import KnowledgeGap, QueryLogRead
from app.schemas import Page

# The optional time window both listings take (:since inclusive, :until exclusive).
_WINDOW = (
    " AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since)"
    " AND (CAST(:until AS timestamptz) IS NULL OR created_at < :until)"
)


# What QueryLogRead shows of a logged call: one list for the page and the single read.
_COLUMNS = (
    "id, agent_id, query, standalone_question, standalone_method, status, confidence, answer, chunks,"
    " prompt_variant, prompt_version, model, timings, cached, semantic_question, semantic_similarity,"
    " semantic_query_id, degraded, action, transfer_reason,"
    " used_sources, evaluation, filters, created_at"
)


class QueryLogRepository:
    """SQL over query_log; every statement is bound to the organisation here."""

    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.org_id = org_id

    async def page(
        self,
        agent_id: uuid.UUID,
        *,
        status: str | None,
        evaluation: bool | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        offset: int,
    ) -> tuple[list[dict[str, Any]], int]:
        where = (
            "org_id = :org AND agent_id = :agent AND (CAST(:status AS text) IS NULL OR status = :status)"
            " AND (CAST(:evaluation AS boolean) IS NULL OR evaluation = :evaluation)" + _WINDOW
        )
        params = {
            "org": self.org_id,
            "agent": agent_id,
            "status": status,
            "evaluation": evaluation,
            "since": since,
            "until": until,
        }
        rows = await self.session.execute(
            text(
                f"SELECT {_COLUMNS} FROM query_log WHERE {where}"
                " ORDER BY created_at DESC, id LIMIT :limit OFFSET :offset"
            ),
            {**params, "limit": limit, "offset": offset},
        )
        total = await self.session.scalar(text(f"SELECT count(*) FROM query_log WHERE {where}"), params)
        return [dict(r._mapping) for r in rows], int(total or 0)

    async def get(self, query_id: uuid.UUID) -> dict[str, Any] | None:
        row = (
            await self.session.execute(
                text(f"SELECT {_COLUMNS} FROM query_log WHERE org_id = :org AND id = :id"),
                {"org": self.org_id, "id": query_id},
            )
        ).first()
        return dict(row._mapping) if row is not None else None

    async def chunk_texts(self, chunk_ids: list[int]) -> dict[int, dict[str, Any]]:
        """The chunks a logged call was given, those that still exist: id -> title, section,
        page, text."""
        rows = await self.session.execute(
            text(
                "SELECT c.id, d.title, c.section, c.page, c.text, c.document_id, c.kb_id"
                " FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE c.org_id = :org AND c.id = ANY(CAST(:ids AS bigint[]))"
            ),
            {"org": self.org_id, "ids": chunk_ids},
        )
        return {r.id: dict(r._mapping) for r in rows}

    async def gaps(
        self,
        *,
        agent_id: uuid.UUID | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        offset: int,
        low_confidence: float,
    ) -> list[dict[str, Any]]:
        rows = await self.session.execute(
            text(
                # A follow-up is grouped and shown as the standalone question it was searched as.
                "SELECT min(coalesce(standalone_question, query)) AS question, count(*) AS count,"
                " max(created_at) AS last_asked,"
                " array_agg(DISTINCT agent_id) AS agent_ids, array_agg(DISTINCT status) AS statuses,"
                " max(confidence) AS max_confidence"
                " FROM query_log"
                # Callers' questions only: evaluation runs ask on purpose what the KBs lack.
                " WHERE org_id = :org AND NOT evaluation"
                " AND (status = 'not_found' OR (status = 'answered' AND confidence < :low))"
                " AND (CAST(:agent AS uuid) IS NULL OR agent_id = :agent)" + _WINDOW +
                # normalized_query last: a stable order, so pages neither repeat nor skip a gap.
                " GROUP BY normalized_query ORDER BY count(*) DESC, max(created_at) DESC, normalized_query"
                " LIMIT :limit OFFSET :offset"
            ),
            {
                "org": self.org_id,
                "agent": agent_id,
                "since": since,
                "until": until,
                "limit": limit,
                "offset": offset,
                "low": low_confidence,
            },
        )
        return [dict(r._mapping) for r in rows]


# A gap is also an answer given with a confidence under this much above the answering floor.
LOW_CONFIDENCE_MARGIN = 0.15


class QueryLogService:
    """An agent's logged calls and the organisation's knowledge gaps, for admins."""

    def __init__(self, session: AsyncSession, org_id: uuid.UUID, *, min_confidence: float) -> None:
        self.repo = QueryLogRepository(session, org_id)
        self.agents = AgentRepository(session, org_id)
        self.low_confidence = min_confidence + LOW_CONFIDENCE_MARGIN

    async def queries(
        self,
        agent_id: uuid.UUID,
        *,
        status: str | None,
        evaluation: bool | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        offset: int,
    ) -> Page[QueryLogRead]:
        await require_known_agent(self.agents, agent_id)
        rows, total = await self.repo.page(
            agent_id,
            status=status,
            evaluation=evaluation,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
        )
        return Page(
            items=[QueryLogRead.model_validate(r) for r in rows], total=total, limit=limit, offset=offset
        )

    async def read(self, query_id: uuid.UUID) -> tuple[QueryLogRead, dict[int, dict[str, Any]]]:
        """One logged call, and the chunks it was given that still exist (by id)."""
        row = await self.repo.get(query_id)
        if row is None:
            raise NotFound("query not found")
        logged = QueryLogRead.model_validate(row)
        ids = [int(c["chunk_id"]) for c in logged.chunks if isinstance(c.get("chunk_id"), int)]
        return logged, await self.repo.chunk_texts(ids) if ids else {}

    async def gaps(
        self,
        *,
        agent_id: uuid.UUID | None,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        offset: int,
    ) -> list[KnowledgeGap]:
        if agent_id is not None:
            await require_known_agent(self.agents, agent_id)
        rows = await self.repo.gaps(
            agent_id=agent_id,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
            low_confidence=self.low_confidence,
        )
        return [
            KnowledgeGap.model_validate(
                {**r, "agent_ids": sorted(r["agent_ids"]), "statuses": sorted(r["statuses"])}
            )
            for r in rows
        ]
