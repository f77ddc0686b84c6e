"""SQL for per-agent settings. Scoped to the organisation in every statement."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.escalation import OnNotFound
from app.answering.attribution import AttributionMode


@dataclass(frozen=True, slots=True)
class FilterReach:
    """What an agent's fixed filters leave of its knowledge (AgentRepository.filter_reach)."""

    has_documents: bool
    passes: bool
    unknown_keys: list[str]


@dataclass(frozen=True, slots=True)
class AgentRecord:
    prompt_variant: str | None
    on_not_found: OnNotFound
    topics: list[str]
    attribution: AttributionMode
    # Fixed filters in the clause form documents_match reads (app/query/filters.py).
    filter_clauses: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AgentSummary:
    agent_id: uuid.UUID
    prompt_variant: str | None
    on_not_found: OnNotFound
    topics: list[str]
    # (id, title) of each KB assigned to the agent, by title.
    kbs: list[tuple[uuid.UUID, str]]


# The organisation's known agents with their settings and assigned KBs, newest change first.
_AGENT_PAGE_SQL = text("""
SELECT a.agent_id, a.prompt_variant, a.escalation_on_not_found, a.escalation_topics,
       coalesce(k.ids, '{}') AS kb_ids, coalesce(k.titles, '{}') AS kb_titles
FROM agents a
LEFT JOIN LATERAL (
    SELECT array_agg(kb.id ORDER BY kb.title, kb.id) AS ids,
           array_agg(kb.title ORDER BY kb.title, kb.id) AS titles
    FROM agent_assignments s JOIN knowledge_bases kb ON kb.id = s.kb_id AND kb.org_id = s.org_id
    WHERE s.org_id = a.org_id AND s.agent_id = a.agent_id
) k ON true
WHERE a.org_id = :org
ORDER BY a.updated_at DESC, a.agent_id
LIMIT :limit OFFSET :offset
""")


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
                    "SELECT prompt_variant, escalation_on_not_found, escalation_topics, attribution,"
                    " filter_clauses FROM agents WHERE org_id = :org AND agent_id = :agent"
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
            attribution=row.attribution,
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

    async def set_attribution(self, agent_id: uuid.UUID, attribution: AttributionMode) -> None:
        await self.session.execute(
            text(
                "UPDATE agents SET attribution = :attribution, updated_at = now()"
                " WHERE org_id = :org AND agent_id = :agent"
            ),
            {"org": self.org_id, "agent": agent_id, "attribution": attribution},
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

    async def page(self, *, limit: int, offset: int) -> tuple[list[AgentSummary], int]:
        params = {"org": self.org_id, "limit": limit, "offset": offset}
        rows = await self.session.execute(_AGENT_PAGE_SQL, params)
        total = await self.session.scalar(
            text("SELECT count(*) FROM agents WHERE org_id = :org"), {"org": self.org_id}
        )
        return [_summary(r._mapping) for r in rows], int(total or 0)

    async def lock_kb(self, kb_id: uuid.UUID) -> bool:
        """Whether the KB is the organisation's, locked as KnowledgeService.set_agents locks it
        (a KB deleted meanwhile cannot gain an assignment)."""
        found = await self.session.scalar(
            text("SELECT 1 FROM knowledge_bases WHERE id = :kb AND org_id = :org FOR UPDATE"),
            {"kb": kb_id, "org": self.org_id},
        )
        return found is not None

    async def assign(self, agent_id: uuid.UUID, kb_id: uuid.UUID) -> None:
        await self.session.execute(
            text(
                "INSERT INTO agent_assignments (kb_id, agent_id, org_id) VALUES (:kb, :agent, :org)"
                " ON CONFLICT (kb_id, agent_id) DO NOTHING"
            ),
            {"kb": kb_id, "agent": agent_id, "org": self.org_id},
        )

    async def unassign(self, agent_id: uuid.UUID, kb_id: uuid.UUID) -> None:
        await self.session.execute(
            text("DELETE FROM agent_assignments WHERE org_id = :org AND agent_id = :agent AND kb_id = :kb"),
            {"kb": kb_id, "agent": agent_id, "org": self.org_id},
        )

    async def set_filters(self, agent_id: uuid.UUID, clauses: list[dict[str, Any]]) -> None:
        await self.session.execute(
            text(
                "UPDATE agents SET filter_clauses = CAST(:clauses AS jsonb), updated_at = now()"
                " WHERE org_id = :org AND agent_id = :agent"
            ),
            {"org": self.org_id, "agent": agent_id, "clauses": json.dumps(clauses)},
        )

    async def filter_reach(self, agent_id: uuid.UUID, clauses: list[dict[str, Any]]) -> FilterReach:
        """Whether the agent's KBs hold documents, whether any passes ``clauses``, and which
        of the clauses' attribute keys no document of them has."""
        keys = [clause["key"] for clause in clauses if "key" in clause]
        row = (
            await self.session.execute(
                text("""
                    WITH docs AS (
                        SELECT d.tags, d.attributes FROM agent_assignments a
                        JOIN documents d ON d.kb_id = a.kb_id AND d.org_id = a.org_id
                        WHERE a.org_id = :org AND a.agent_id = :agent
                    )
                    SELECT EXISTS (SELECT 1 FROM docs) AS has_documents,
                           EXISTS (SELECT 1 FROM docs
                                   WHERE documents_match(tags, attributes, CAST(:clauses AS jsonb)))
                             AS passes,
                           ARRAY(SELECT DISTINCT k FROM docs, jsonb_object_keys(attributes) AS k
                                 WHERE k = ANY(CAST(:keys AS text[]))) AS known_keys
                """),
                {"org": self.org_id, "agent": agent_id, "clauses": json.dumps(clauses), "keys": keys},
            )
        ).one()
        unknown = sorted(set(keys) - set(row.known_keys))
        return FilterReach(has_documents=row.has_documents, passes=row.passes, unknown_keys=unknown)


def _summary(row: Any) -> AgentSummary:
    return AgentSummary(
        agent_id=row["agent_id"],
        prompt_variant=row["prompt_variant"],
        on_not_found=row["escalation_on_not_found"],
        topics=list(row["escalation_topics"]),
        kbs=list(zip(row["kb_ids"], row["kb_titles"], strict=True)),
    )
