"""Per-agent settings: which prompt variant answers for the agent (A/B comparison), and when
the caller is handed to a human (escalation)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.escalation import phrase_words
from app.agents.repository import AgentRecord, AgentRepository, AgentSummary
from app.agents.schemas import AgentSettingsRead, AgentSettingsUpdate, EscalationRead, EscalationSettings
from app.errors import NotFound, ValidationFailed
from app.query.filters import from_clauses, to_clauses

AGENT_NOT_FOUND = "agent not found: no knowledge base of this organisation is assigned to it"
# As KnowledgeService says it.
KB_NOT_FOUND = "knowledge base not found"


async def require_known_agent(agents: AgentRepository, agent_id: uuid.UUID) -> None:
    """Every route under ``/api/agents/{agent_id}`` (and an ``agent_id`` filter) answers 404 for
    an agent never assigned in the organisation, another organisation's included."""
    if not await agents.is_known(agent_id):
        raise NotFound(AGENT_NOT_FOUND)


class AgentService:
    def __init__(
        self, session: AsyncSession, org_id: uuid.UUID, variants: list[str], default_variant: str = "default"
    ) -> None:
        self.session = session
        self.repo = AgentRepository(session, org_id)
        self.variants = variants
        # What answers for an agent without a variant, or whose variant left prompts/.
        self.default_variant = default_variant

    async def get(self, agent_id: uuid.UUID) -> AgentSettingsRead:
        agent = await self.repo.find(agent_id)
        if agent is None:
            raise NotFound(AGENT_NOT_FOUND)
        return await self._read(agent_id, agent)

    async def update(self, agent_id: uuid.UUID, data: AgentSettingsUpdate) -> AgentSettingsRead:
        stored = await self.repo.find(agent_id)
        if stored is None:
            raise NotFound(AGENT_NOT_FOUND)
        # A variant gone from prompts/ may be kept as it is (saving the agent's other settings
        # must not quietly drop it), never newly chosen.
        if (
            data.prompt_variant is not None
            and data.prompt_variant not in self.variants
            and data.prompt_variant != stored.prompt_variant
        ):
            raise ValidationFailed(
                f"unknown prompt variant '{data.prompt_variant}'",
                extra=[{"field": "prompt_variant", "message": f"one of: {', '.join(self.variants)}"}],
            )
        await self.repo.set_prompt_variant(agent_id, data.prompt_variant)
        # Left out, the policy stays as it is.
        if data.escalation is not None:
            await self.repo.set_escalation(
                agent_id, data.escalation.on_not_found, escalation_topics(data.escalation)
            )
        if data.attribution is not None:
            await self.repo.set_attribution(agent_id, data.attribution)
        if "filters" in data.model_fields_set:
            # Not refused when no document passes them: the documents may come later (the
            # call's own filters are checked: 422). The reply's warnings say so instead.
            await self.repo.set_filters(agent_id, to_clauses(data.filters))
        agent = await self.repo.find(agent_id)
        assert agent is not None  # known above, in this transaction
        await self.session.commit()
        return await self._read(agent_id, agent)

    async def page(self, *, limit: int, offset: int) -> tuple[list[AgentSummary], int]:
        """The organisation's known agents (the console's list), with their KBs and settings."""
        return await self.repo.page(limit=limit, offset=offset)

    async def assign(self, agent_id: uuid.UUID, kb_id: uuid.UUID) -> None:
        """Assign one KB to the agent (a new agent id becomes known here), the others kept."""
        if not await self.repo.lock_kb(kb_id):
            raise NotFound(KB_NOT_FOUND)
        await self.repo.assign(agent_id, kb_id)
        await self.repo.register([agent_id])
        await self.session.commit()

    async def unassign(self, agent_id: uuid.UUID, kb_id: uuid.UUID) -> None:
        """Take one KB from the agent; the agent stays known (and answers "not found")."""
        await require_known_agent(self.repo, agent_id)
        if not await self.repo.lock_kb(kb_id):
            raise NotFound(KB_NOT_FOUND)
        await self.repo.unassign(agent_id, kb_id)
        await self.session.commit()

    async def _read(self, agent_id: uuid.UUID, agent: AgentRecord) -> AgentSettingsRead:
        return AgentSettingsRead(
            agent_id=agent_id,
            prompt_variant=agent.prompt_variant,
            available_variants=self.variants,
            escalation=EscalationRead(on_not_found=agent.on_not_found, topics=agent.topics),
            attribution=agent.attribution,
            filters=from_clauses(agent.filter_clauses),
            warnings=self._variant_warnings(agent.prompt_variant)
            + await self._filter_warnings(agent_id, agent.filter_clauses),
        )

    def _variant_warnings(self, variant: str | None) -> list[str]:
        """A variant set when it existed, since taken out of prompts/: the calls are answered
        with the default prompts, which nobody chose for this agent."""
        if variant is None or variant in self.variants:
            return []
        return [
            f"the prompt variant '{variant}' is no longer in prompts/: the agent is answered with "
            f"'{self.default_variant}' until its variant is set again"
        ]

    async def _filter_warnings(self, agent_id: uuid.UUID, clauses: list[dict[str, Any]]) -> list[str]:
        """Fixed filters that hide every document the agent has: each call is then answered
        "I don't have that information", which nobody would hear as a misspelt key."""
        if not clauses:
            return []
        reach = await self.repo.filter_reach(agent_id, clauses)
        if not reach.has_documents or reach.passes:
            return []
        warnings = [
            f"no document of this agent's knowledge bases has the attribute '{key}'"
            for key in reach.unknown_keys
        ]
        warnings.append(
            "no document of this agent's knowledge bases passes its filters: until one does, every call "
            "is answered not_found"
        )
        return warnings


def escalation_topics(escalation: EscalationSettings) -> list[str]:
    """The topics as stored and matched (app/agents/escalation.py), each once, in the order
    given: "Complaint" and "complaint!" say the same words."""
    return list(dict.fromkeys(phrase_words(topic) for topic in escalation.topics))
