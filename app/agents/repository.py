"""SQL for per-agent settings. Scoped to the organisation in every statement."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.escalation import OnNotFound


@dataclass(frozen=True, slots=True)
class AgentRecord:
    prompt_variant: str | None
    on_not_found: OnNotFound
    topics: list[str]
    # Fixed filters in the clause form documents_match reads (app/query/filters.py).
    filter_clauses: list[dict[str, Any]] = field(default_factory=list)


class AgentRepository:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.org_id = org_id

    async def is_known(self, agent_id: uuid.UUID) -> bool:
        """Agents become known to an organisation when one of its KBs is first assigned to
        them (see register), and stay known when every KB is unassigned again."""
        found = await self.session.scalar(
            text("SELECT 1 FROM agents WHERE org_id = :org AND agent_id = :agent"),
            {"org": self.org_id, "agent": agent_id},
        )
        return found is not None

    async def register(self, agent_ids: list[uuid.UUID]) -> None:
        """Make agents known to the organisation (on assignment). A known agent with no KB
        left is answered "not found" aloud, not with a 404 that breaks a live call."""
        if agent_ids:
            await self.session.execute(
                text(
                    "INSERT INTO agents (org_id, agent_id) SELECT :org, unnest(CAST(:agents AS uuid[]))"
                    " ON CONFLICT (org_id, agent_id) DO NOTHING"
                ),
                {"org": self.org_id, "agents": agent_ids},
            )

    async def find(self, agent_id: uuid.UUID) -> AgentRecord | None:
        """The agent's settings in this organisation; None when it is not known here."""
        row = (
            await self.session.execute(
                text(
                    "SELECT prompt_variant, escalation_on_not_found, escalation_topics, filter_clauses"
                    " FROM agents"
                    " WHERE org_id = :org AND agent_id = :agent"
                ),
                {"org": self.org_id, "agent": agent_id},
            )
        ).first()
        if row is None:
            return None
        return AgentRecord(
            prompt_variant=row.prompt_variant,
            on_not_found=row.escalation_on_not_found,
            topics=list(row.escalation_topics),
            filter_clauses=list(row.filter_clauses),
        )

    async def set_prompt_variant(self, agent_id: uuid.UUID, variant: str | None) -> None:
        await self.session.execute(
            text(
                "INSERT INTO agents (org_id, agent_id, prompt_variant) VALUES (:org, :agent, :variant)"
                " ON CONFLICT (org_id, agent_id) DO UPDATE SET prompt_variant = excluded.prompt_variant,"
                " updated_at = now()"
            ),
            {"org": self.org_id, "agent": agent_id, "variant": variant},
        )

    async def set_escalation(self, agent_id: uuid.UUID, on_not_found: OnNotFound, topics: list[str]) -> None:
        await self.session.execute(
            text(
                "UPDATE agents SET escalation_on_not_found = :on_not_found,"
                " escalation_topics = CAST(:topics AS text[]), updated_at = now()"
                " WHERE org_id = :org AND agent_id = :agent"
            ),
            {"org": self.org_id, "agent": agent_id, "on_not_found": on_not_found, "topics": topics},
        )

    async def set_filters(self, agent_id: uuid.UUID, clauses: list[dict[str, Any]]) -> None:
        await self.session.execute(
            text(
                "UPDATE agents SET filter_clauses = CAST(:clauses AS jsonb), updated_at = now()"
                " WHERE org_id = :org AND agent_id = :agent"
            ),
            {"org": self.org_id, "agent": agent_id, "clauses": json.dumps(clauses)},
        )
