from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, StringConstraints, WithJsonSchema

from app.query.filters import QueryFilters
from app.schemas import SPACE, Input, StrippedRequired

Status = Literal["answered", "not_found", "unavailable"]
Action = Literal["answer", "say_not_found", "say_unavailable", "transfer"]

# C0 control characters but tab and newline: NUL cannot be stored (the query log would
# lose the call) and none of them means anything in a spoken question.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")


def strip_controls(value: str) -> str:
    """A caller's transcription glitch is dropped, and the question still answered; a question
    of nothing else is then empty (422, as any empty question)."""
    return _CONTROL.sub("", value) if _CONTROL.search(value) else value


# At most 2,000 characters as sent; what is left without control characters and surrounding
# whitespace must not be empty. The schema's pattern says the same: some character that is
# neither a C0 control nor whitespace.
Question = Annotated[
    str,
    StringConstraints(max_length=2000),
    AfterValidator(strip_controls),
    StrippedRequired,
    WithJsonSchema({"type": "string", "maxLength": 2000, "pattern": rf"[^\x00-\x1f{SPACE}]"}),
]


class QueryRequest(Input):
    query: Question
    variant: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,50}$")] | None = Field(
        None, description="Prompt variant to use (debug mode only)."
    )
    filters: QueryFilters | None = Field(
        None,
        description="Only documents whose tags and attributes match are searched (combined with the "
        'agent\'s fixed filters); see docs/INTEGRATION.md, "Filters and freshness".',
    )


class Source(BaseModel):
    """A chunk an answered reply rests on (README, "query_knowledge's reply")."""

    document_id: uuid.UUID
    title: str
    section: str | None
    page: int | None
    chunk_id: int
    score: float = Field(
        description="The chunk's reciprocal-rank-fusion score: the sum, over the BM25 list and the "
        "vector list, of the list's weight / (k + the chunk's rank in it). It orders the chunks of one "
        "reply and is not a probability (that is the reply's `confidence`)."
    )


class Timings(BaseModel):
    embed: float = Field(description="The question's embedding call (it runs beside the SQL).")
    search: float = Field(description="The agent's context and the retrieval statements, waits included.")
    llm: float = Field(description="The answering model's call.")
    total: float = Field(description="The whole call, from the handler's start to its answer.")
    own: float = Field(
        description="total minus the time spent waiting for the providers (the answering model, and "
        "the embedding where nothing else was running): the service's own time."
    )


class QueryResponse(BaseModel):
    answer: str
    status: Status
    confidence: float
    sources: list[Source] = Field(
        description="Answered: the chunks the answer was read from first (with an answering model, "
        "which ones it drew on is not known), then the other candidates scoring at least half the best "
        "candidate's score (and above 0); at least the best candidate. not_found and unavailable: none. "
        "`debug=true` lists every candidate."
    )
    action: Action = Field(
        description="What the runtime does: `answer` (say `answer`), `say_not_found` and `say_unavailable` "
        "(say `answer`, an apology), `transfer` (say `answer`, the transfer line, then hand the caller to a "
        "human). Set by the agent's escalation policy (`/api/agents/{agent_id}/settings`)."
    )
    transfer_reason: str | None = Field(
        description="With `transfer`: `not_found` (nothing known, and the agent transfers then) or "
        "`topic:<phrase>` (the question names one of the agent's escalation topics). Otherwise null.",
        pattern=r"^(not_found|topic:.+)$",
    )
    query_id: uuid.UUID
    cached: bool
    degraded: bool
    timings_ms: Timings
    debug: dict[str, Any] | None = None


class QueryLogRead(BaseModel):
    id: uuid.UUID
    agent_id: uuid.UUID
    query: str
    status: str
    confidence: float
    answer: str
    chunks: list[dict[str, Any]]
    prompt_variant: str | None
    prompt_version: str | None
    model: str | None
    timings: dict[str, float]
    cached: bool
    degraded: bool
    action: str | None = Field(description="The reply's `action`; null for calls logged before it existed.")
    transfer_reason: str | None
    evaluation: bool = Field(
        description="Asked by an evaluation (`X-Evaluation: true`: vk eval, vk replay), not by a caller."
    )
    filters: dict[str, Any] | None = Field(
        None,
        description="The call's and the agent's filters as applied, and how many documents they and "
        "the validity windows hid (`{request, agent, hidden_documents}`); null when none.",
    )
    created_at: datetime


class KnowledgeGap(BaseModel):
    question: str
    count: int
    last_asked: datetime
    agent_ids: list[uuid.UUID]
    statuses: list[str]
    max_confidence: float


ToolUnavailable = Literal["no_knowledge_base", "no_documents", "no_ready_documents"]


class ToolRead(BaseModel):
    format: Literal["openai-realtime", "openai-chat", "gemini"]
    available: bool = Field(
        description="Whether query_knowledge can answer: some knowledge base assigned to the agent holds a "
        "ready document. When false, leave the tool and the instructions out of the voice session."
    )
    reason: ToolUnavailable | None = Field(
        description="Why it cannot (null when `available`): `no_knowledge_base` (none assigned), "
        "`no_documents` (the assigned knowledge bases hold no document), `no_ready_documents` (their "
        "documents are all pending, processing or failed)."
    )
    tool: dict[str, Any] = Field(description="The function declaration, in the requested format.")
    instructions: str = Field(
        description="Agent instructions that tell the voice model when to call the tool."
    )
    prompt_version: str
