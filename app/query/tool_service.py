"""An agent's query_knowledge tool declaration and instructions, built from its knowledge
bases and prompt variant; and the start-up check that every variant's tool description
leaves room for the knowledge summary."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.repository import AgentRepository
from app.agents.service import AGENT_NOT_FOUND
from app.config import Settings
from app.errors import NotFound
from app.prompting import PromptError, PromptLibrary, PromptSet
from app.prompting.library import DEFAULT_VARIANT
from app.query.schemas import ToolRead, ToolUnavailable
from app.query.tool_declaration import (
    MAX_ENUM,
    DocumentInfo,
    FilterInfo,
    KnowledgeBaseInfo,
    ToolFormat,
    knowledge_summary,
    tool_definition,
)

# A document can answer this agent's calls when it has chunks (a ready one, or one whose new
# version is pending or failed while its previous chunks stay live), is inside its validity
# window now, and passes the agent's fixed filters: the same rules query_knowledge applies
# (app/query/repository.py), so the declaration never offers what a call cannot find.
_SELECTABLE = """(d.effective_from IS NULL OR d.effective_from <= now())
    AND (d.expires_at IS NULL OR d.expires_at > now())
    AND documents_match(d.tags, d.attributes, agent.clauses)"""
_ANSWERS = f"d.chunk_count > 0 AND {_SELECTABLE}"
_AGENT_CLAUSES = """agent AS (
    SELECT coalesce(
        (SELECT filter_clauses FROM agents WHERE org_id = :org AND agent_id = :agent), '[]'::jsonb
    ) AS clauses
)"""

# The agent's KBs and the documents that answer, in one statement, scoped to the
# organisation. The summary's budget holds about a hundred titles in all, so no more than
# that is read per KB: an agent over 100,000 documents would otherwise load them all and
# take half a second to summarise them. Each KB row also says whether it can answer,
# whether it has chunks at all and whether it holds any document, for the declaration's
# `available` and `reason`.
DOCUMENTS_PER_KB = 100
AGENT_TOPICS_SQL = text(f"""
WITH {_AGENT_CLAUSES}
SELECT kb.id, kb.title, kb.description,
       EXISTS (SELECT 1 FROM documents d WHERE d.kb_id = kb.id AND {_ANSWERS}) AS answers,
       kb.chunk_count > 0 AS has_chunks,
       EXISTS (SELECT 1 FROM documents WHERE kb_id = kb.id) AS has_documents,
       t.title AS doc_title, t.description AS doc_description
FROM agent, agent_assignments a
JOIN knowledge_bases kb ON kb.id = a.kb_id AND kb.org_id = a.org_id
LEFT JOIN LATERAL (
    SELECT d.title, d.description, d.created_at, d.id FROM documents d
    WHERE d.kb_id = kb.id AND {_ANSWERS}
    ORDER BY d.created_at, d.id
    LIMIT {DOCUMENTS_PER_KB}
) t ON true
WHERE a.org_id = :org AND a.agent_id = :agent
ORDER BY kb.created_at, kb.id, t.created_at, t.id
""")

# What the agent's filters can select: the tags and attribute values of the documents inside
# their window that the agent's fixed filters keep, chunks or not yet (a document being
# ingested is about to answer), at most MAX_ENUM + 1 values per key (one more says "too many
# to list").
FILTER_VALUES_SQL = text(f"""
WITH {_AGENT_CLAUSES}, docs AS (
    SELECT d.tags, d.attributes FROM agent, agent_assignments a
    JOIN documents d ON d.kb_id = a.kb_id AND d.org_id = a.org_id
    WHERE a.org_id = :org AND a.agent_id = :agent AND {_SELECTABLE}
), pairs AS (
    SELECT NULL::text AS key, t AS value FROM docs, unnest(docs.tags) AS t
    UNION ALL
    SELECT a.key, a.value FROM docs, jsonb_each_text(docs.attributes) AS a
), ranked AS (
    SELECT key, value, row_number() OVER (PARTITION BY key ORDER BY value) AS n
    FROM (SELECT DISTINCT key, value FROM pairs) v
)
SELECT key, value FROM ranked WHERE n <= {MAX_ENUM + 1}
ORDER BY key NULLS FIRST, value
""")
MAX_FILTER_KEYS = 20

# OpenAI rejects a function description over 1,024 characters ("string_above_max_length")
# in Chat Completions; the Realtime API documents no limit, so it gets the same one to be
# safe. The instructions carry the full summary either way.
DESCRIPTION_LIMITS: dict[str, int] = {"openai-chat": 1024, "openai-realtime": 1024}
SUMMARY_BUDGET = 1500


def check_tool_prompts(prompts: PromptLibrary) -> None:
    """At start-up: every variant's tool description leaves room for a summary."""
    for variant in prompts.variants:
        bare = len(prompts.get(variant).tool_description(knowledge_summary=""))
        for fmt, limit in DESCRIPTION_LIMITS.items():
            if limit - bare < 100:
                raise PromptError(
                    f"prompt variant {variant!r}: tool.description.md takes {bare} of the {limit} "
                    f"characters a {fmt} function description may have; shorten it"
                )


def load_prompts(settings: Settings) -> PromptLibrary:
    """The prompt library, checked against the settings; PromptError names what is wrong.
    The CLI calls it before anything starts, where the error is one line; it lives here, with
    the tool prompts' check, and not in app.main, whose import would create the metrics files
    of the ``PROMETHEUS_MULTIPROC_DIR`` that ``vk serve`` has yet to check."""
    prompts = PromptLibrary.load(settings.prompts_dir)
    if settings.query.prompt_variant not in prompts.variants:
        raise PromptError(
            f"QUERY__PROMPT_VARIANT={settings.query.prompt_variant!r} is not a prompt variant "
            f"(known: {', '.join(prompts.variants)})"
        )
    check_tool_prompts(prompts)
    return prompts


class ToolService:
    def __init__(
        self,
        session: AsyncSession,
        org_id: uuid.UUID,
        prompts: PromptLibrary,
        default_variant: str | None = None,
    ) -> None:
        self.session = session
        self.org_id = org_id
        self.prompts = prompts
        self.default_variant = default_variant

    async def topics(self, agent_id: uuid.UUID) -> list[KnowledgeBaseInfo]:
        """The agent's KBs with the documents that answer."""
        return (await self._topics(agent_id))[0]

    async def _topics(self, agent_id: uuid.UUID) -> tuple[list[KnowledgeBaseInfo], ToolUnavailable | None]:
        """The agent's KBs with the documents that answer, and why the tool cannot answer
        (None when it can), from one statement."""
        rows = (await self.session.execute(AGENT_TOPICS_SQL, {"org": self.org_id, "agent": agent_id})).all()
        kbs: dict[uuid.UUID, tuple[str, str, list[DocumentInfo]]] = {}
        answers = has_chunks = has_documents = False
        for r in rows:
            entry = kbs.setdefault(r.id, (r.title, r.description, []))
            answers |= r.answers
            has_chunks |= r.has_chunks
            has_documents |= r.has_documents
            if r.doc_title is not None:
                entry[2].append(DocumentInfo(title=r.doc_title, description=r.doc_description))
        topics = [KnowledgeBaseInfo(title=t, description=d, documents=docs) for t, d, docs in kbs.values()]
        if answers:
            return topics, None
        if not kbs:
            return topics, "no_knowledge_base"
        if has_chunks:
            return topics, "no_active_documents"
        return topics, "no_ready_documents" if has_documents else "no_documents"

    async def filter_info(self, agent_id: uuid.UUID) -> FilterInfo:
        """The tags and attribute values of the documents that can answer the agent, for the
        declaration; attribute keys in alphabetical order, the first MAX_FILTER_KEYS."""
        rows = (await self.session.execute(FILTER_VALUES_SQL, {"org": self.org_id, "agent": agent_id})).all()
        values: dict[str | None, list[str]] = {}
        for r in rows:
            values.setdefault(r.key, []).append(r.value)
        listed = {k: (v if len(v) <= MAX_ENUM else None) for k, v in values.items()}
        tags = listed.pop(None, [])
        keys = sorted(k for k in listed if k is not None)[:MAX_FILTER_KEYS]
        return FilterInfo(tags=tags, attributes={k: listed[k] for k in keys})

    async def tool(self, agent_id: uuid.UUID, fmt: ToolFormat, variant: str | None = None) -> ToolRead:
        """The declaration and instructions in the prompt variant that answers for the agent:
        `variant`, else the agent's own setting, else the configured default; and whether the
        tool can answer yet. Both are given either way: a runtime that reads `available`
        leaves them out, one that does not keeps working (its calls hear `not_found`)."""
        agent = await AgentRepository(self.session, self.org_id).find(agent_id)
        if agent is None:
            raise NotFound(AGENT_NOT_FOUND)
        fallback = self.default_variant or DEFAULT_VARIANT
        prompt = self.prompts.get_or_default(variant or agent.prompt_variant or fallback, fallback)
        topics, unavailable = await self._topics(agent_id)
        filters = await self.filter_info(agent_id)
        summary = knowledge_summary(topics, budget_chars=SUMMARY_BUDGET)
        return ToolRead(
            format=fmt,
            available=unavailable is None,
            reason=unavailable,
            tool=tool_definition(
                fmt,
                description=_description(prompt, topics, summary, DESCRIPTION_LIMITS.get(fmt)),
                query_description=prompt.query_parameter_description,
                history_description=prompt.history_parameter_description,
                filters=filters,
            ),
            instructions=prompt.agent_instructions(knowledge_summary=summary),
            prompt_version=prompt.version,
        )


def _description(prompt: PromptSet, topics: list[KnowledgeBaseInfo], summary: str, limit: int | None) -> str:
    description = prompt.tool_description(knowledge_summary=summary)
    if limit is None or len(description) <= limit:
        return description
    room = limit - len(prompt.tool_description(knowledge_summary=""))
    return prompt.tool_description(knowledge_summary=knowledge_summary(topics, budget_chars=room))
