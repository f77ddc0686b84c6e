from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

from app.query.filters import QueryFilters
from app.schemas import INVISIBLE, SPACE, Input, StrippedRequired

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
# neither a C0 control, whitespace nor invisible.
Question = Annotated[
    str,
    StringConstraints(max_length=2000),
    AfterValidator(strip_controls),
    StrippedRequired,
    WithJsonSchema({"type": "string", "maxLength": 2000, "pattern": rf"[^\x00-\x1f{SPACE}{INVISIBLE}]"}),
]


# What a turn said: at most 2,000 characters, control characters dropped. It may be empty (an
# assistant turn that only called a tool): such a turn is skipped, not refused.
TurnText = Annotated[
    str,
    StringConstraints(max_length=2000),
    AfterValidator(strip_controls),
    WithJsonSchema({"type": "string", "maxLength": 2000}),
]


class HistoryTurn(Input):
    role: Literal["user", "assistant"] = Field(description="`user`: the caller; `assistant`: the agent.")
    content: TurnText = Field(description="What was said in that turn (a turn that says nothing is skipped).")


class QueryRequest(Input):
    query: Question
    history: list[HistoryTurn] | None = Field(
        None,
        max_length=20,
        description="The last few turns of the call before `query`, oldest first (docs/INTEGRATION.md, "
        '"Conversation context"). A follow-up such as "How much is it?" is made standalone from them '
        "before it is searched; a question that stands alone is left as it is. Up to 20 turns are "
        "accepted; of the turns that say something, the last `QUERY__HISTORY_MAX_TURNS` (6 by default) "
        "are read, each up to its last `QUERY__HISTORY_MAX_TURN_CHARS` characters (1,000), and the "
        "oldest of them left out beyond `QUERY__HISTORY_MAX_TOTAL_CHARS` in all (6,000).",
    )
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
    llm: float = Field(
        description="The models' calls: the answering model's, and the rewrite of a follow-up question "
        "(`history`) when there was one."
    )
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
        description="Answered: the chunks the answer was read from first (`used_sources`), then the "
        "other candidates scoring at least half the best "
        "candidate's score (and above 0); at least the best candidate. not_found and unavailable: none. "
        "`debug=true` lists every candidate."
    )
    used_sources: list[int] = Field(
        description="The `chunk_id`s the answer was read from, a subset of `sources`: the chunks of the "
        "sentences read out, or, with an answering model, the chunks its answer shares its words with "
        "(inferred, docs/INTEGRATION.md). Empty unless `answered` and not transferred."
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


class QueryReply(msgspec.Struct, omit_defaults=True):
    """query_knowledge's reply as the service makes it and the endpoint returns it: the fields
    of QueryResponse (which documents them in the OpenAPI schema), encoded by msgspec with no
    validation pass on the hot path; ``debug`` only in debug mode."""

    answer: str
    status: Status
    confidence: float
    sources: list[dict[str, Any]]
    used_sources: list[int]
    action: Action
    transfer_reason: str | None
    query_id: str
    cached: bool
    degraded: bool
    timings_ms: dict[str, float]
    debug: dict[str, Any] | None = None


class QueryLogRead(BaseModel):
    id: uuid.UUID
    agent_id: uuid.UUID
    query: str
    standalone_question: str | None = Field(
        description="The question searched and answered when the caller's `query` was made standalone "
        "from the call's `history`; null when `query` itself was."
    )
    standalone_method: Literal["none", "offline", "model"] | None = Field(
        description="How: `none` (as asked), `offline` (completed from earlier turns by word rules), "
        "`model` (rewritten by the chat model); null for calls logged before it existed."
    )
    status: str
    confidence: float
    answer: str
    chunks: list[dict[str, Any]]
    prompt_variant: str | None
    prompt_version: str | None
    model: str | None
    timings: dict[str, float]
    cached: bool
    semantic_question: str | None = Field(
        description="When the answer was reused from an earlier call asked in other words (the "
        "semantic answer cache, docs/CONFIDENCE.md): that call's question; else null."
    )
    semantic_similarity: float | None = Field(
        description="The similarity of the two questions' embeddings, when `semantic_question` is set."
    )
    semantic_query_id: uuid.UUID | None = Field(description="The id of the call whose answer was reused.")
    degraded: bool
    action: str | None = Field(description="The reply's `action`; null for calls logged before it existed.")
    transfer_reason: str | None
    used_sources: list[int] | None = Field(
        description="The reply's `used_sources`; null for calls logged before it existed."
    )
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


ToolUnavailable = Literal["no_knowledge_base", "no_documents", "no_ready_documents", "no_active_documents"]


class ToolRead(BaseModel):
    format: Literal["openai-realtime", "openai-chat", "gemini"]
    available: bool = Field(
        description="Whether query_knowledge can answer: some knowledge base assigned to the agent holds a "
        "ready document inside its validity window that the agent's fixed filters keep. When false, "
        "leave the tool and the instructions out of the voice session."
    )
    reason: ToolUnavailable | None = Field(
        description="Why it cannot (null when `available`): `no_knowledge_base` (none assigned), "
        "`no_documents` (the assigned knowledge bases hold no document), `no_ready_documents` (their "
        "documents are all pending, processing or failed), `no_active_documents` (documents with text "
        "exist, but every one is outside its validity window or excluded by the agent's fixed filters)."
    )
    tool: dict[str, Any] = Field(description="The function declaration, in the requested format.")
    instructions: str = Field(
        description="Agent instructions that tell the voice model when to call the tool."
    )
    prompt_version: str


VariantName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,50}$")]


def _json_boolean(value: Any) -> Any:
    # Litestar validates request bodies in lax mode, where StrictBool is lax too: a JSON 0 or
    # "yes" would pass for a boolean the schema promises.
    if not isinstance(value, bool):
        raise PydanticCustomError("bool_type", "Input should be a valid boolean")
    return value


JsonBool = Annotated[bool, BeforeValidator(_json_boolean)]


class PlaygroundRequest(Input):
    query: Question
    history: list[HistoryTurn] | None = Field(
        None,
        max_length=20,
        description="The turns of the call before `query`, oldest first, read as query_knowledge reads "
        "them: a follow-up is made standalone from them before it is searched (each run's `context`).",
    )
    variant: VariantName | None = Field(
        None, description="The prompt variant to answer with; absent: the agent's own (its settings)."
    )
    compare_variant: VariantName | None = Field(
        None, description="A second prompt variant: the same question is answered with it too, side by side."
    )
    skip_model: JsonBool = Field(
        False, description="Answer with the extractive answerer (offline), never calling the answering model."
    )


class RetrieverHit(BaseModel):
    """A chunk as one retriever (BM25 or the vectors) ranked it."""

    rank: int
    score: float = Field(description="BM25: the chunk's BM25 score. Vectors: its cosine similarity.")
    fused_score: float = Field(description="Its reciprocal-rank-fusion score over both lists.")
    chunk_id: int
    document_id: uuid.UUID
    title: str
    section: str | None
    page: int | None
    text: str


class FusedHit(BaseModel):
    """A chunk of the fused list the answer is chosen from."""

    rank: int
    score: float = Field(description="The reciprocal-rank-fusion score (see `Source.score`).")
    text_rank: int | None
    vector_rank: int | None
    chunk_id: int
    document_id: uuid.UUID
    title: str
    section: str | None
    page: int | None
    text: str


class ChatMessage(BaseModel):
    role: str
    content: str


class PlaygroundRun(BaseModel):
    """One variant's dry run: the reply query_knowledge would give, and how it was made."""

    variant: str
    prompt_version: str
    answer: str
    status: Status
    confidence: float
    action: Action
    transfer_reason: str | None
    degraded: bool
    sources: list[Source]
    answered_by: str = Field(description="`extractive`, or the answering model's name.")
    model: str | None = Field(description="The answering model of this variant; null when none is set up.")
    model_called: bool
    model_error: str | None = Field(description="Why the model's answer was not used, when it failed.")
    tokens: dict[str, int] | None
    plan: str | None = Field(description="The vector search plan (`exact`, `memory`, `iterative`, `hnsw`).")
    embedded: bool | None = Field(description="Whether the question was embedded (false: BM25 alone).")
    confidence_parts: dict[str, float] | None
    bm25: list[RetrieverHit] = Field(description="BM25's candidates, best first.")
    vector: list[RetrieverHit] = Field(description="The vector search's candidates, nearest first.")
    fused: list[FusedHit] = Field(description="The fused top_k chunks, best first.")
    messages: list[ChatMessage] | None = Field(
        description="The exact messages the answering model is (or would be) sent; null without candidates."
    )
    escalation: dict[str, Any] | None
    context: dict[str, Any] | None = Field(
        description="How the question was made standalone from `history`: `standalone_question`, "
        "`method` (`none`, `offline` or `model`) and, when the model was asked, `rewrite_messages`: the "
        "exact messages it was sent."
    )
    timings_ms: Timings


class PlaygroundResponse(BaseModel):
    query: str
    skip_model: bool
    runs: list[PlaygroundRun] = Field(description="One run, or two with `compare_variant`, in that order.")
