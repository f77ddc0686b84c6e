"""The query_knowledge tool declaration and agent instructions, per agent."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.prompting import PromptLibrary
from app.query.tool import DocumentInfo, KnowledgeBaseInfo, ToolFormat, knowledge_summary, tool_definition

# The agent's KBs and their documents, in one statement, scoped to the organisation.
AGENT_TOPICS_SQL = text("""
SELECT kb.id, kb.title, kb.description, d.title AS doc_title, d.description AS doc_description
FROM agent_assignments a
JOIN knowledge_bases kb ON kb.id = a.kb_id AND kb.org_id = a.org_id
LEFT JOIN documents d ON d.kb_id = kb.id AND d.status = 'ready'
WHERE a.org_id = :org AND a.agent_id = :agent
ORDER BY kb.created_at, kb.id, d.created_at, d.id
""")


class ToolService:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID, prompts: PromptLibrary) -> None:
        self.session = session
        self.org_id = org_id
        self.prompts = prompts

    async def topics(self, agent_id: uuid.UUID) -> list[KnowledgeBaseInfo]:
        rows = (await self.session.execute(AGENT_TOPICS_SQL, {"org": self.org_id, "agent": agent_id})).all()
        kbs: dict[uuid.UUID, tuple[str, str, list[DocumentInfo]]] = {}
        for r in rows:
            entry = kbs.setdefault(r.id, (r.title, r.description, []))
            if r.doc_title is not None:
                entry[2].append(DocumentInfo(title=r.doc_title, description=r.doc_description))
        return [KnowledgeBaseInfo(title=t, description=d, documents=docs) for t, d, docs in kbs.values()]

    async def tool(self, agent_id: uuid.UUID, fmt: ToolFormat, variant: str | None = None) -> dict[str, Any]:
        prompt = self.prompts.get(variant)
        summary = knowledge_summary(await self.topics(agent_id))
        return {
            "format": fmt,
            "tool": tool_definition(
                fmt,
                description=prompt.tool_description(knowledge_summary=summary),
                query_description=prompt.query_parameter_description,
            ),
            "instructions": prompt.agent_instructions(knowledge_summary=summary),
            "prompt_version": prompt.version,
        }
