from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Self

from pydantic import BaseModel, Field, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from app.documents.schemas import DocumentSummary
from app.schemas import Description, Input, JsonInteger, Title

# PostgreSQL's own text-search configurations (16: 29 of them). The service also accepts a
# configuration an operator added to the database (checked there); the schema lists the ones
# every installation has.
BUILT_IN_LANGUAGES = (
    "simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish",
    "french", "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian",
    "lithuanian", "nepali", "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish",
    "swedish", "tamil", "turkish", "yiddish",
)  # fmt: skip
Language = Annotated[
    str,
    Field(pattern=r"^[a-z_]{2,32}$"),
    WithJsonSchema(
        {
            "type": "string",
            "enum": list(BUILT_IN_LANGUAGES),
            "description": "PostgreSQL text-search configuration: stems words and drops stop words.",
        }
    ),
]


class KnowledgeBaseCreate(Input):
    title: Title
    description: Description = ""
    language: Language = "english"
    chunk_tokens: Annotated[int, Field(ge=64, le=2000), JsonInteger] | None = None
    chunk_overlap_tokens: Annotated[int, Field(ge=0, le=1000), JsonInteger] | None = Field(
        None, description="At most half of chunk_tokens (or of the default, when omitted)."
    )

    @model_validator(mode="after")
    def _overlap_within_chunk(self) -> Self:
        if (
            self.chunk_tokens is not None
            and self.chunk_overlap_tokens is not None
            and self.chunk_overlap_tokens > self.chunk_tokens // 2
        ):
            raise PydanticCustomError(
                "overlap_above_half", "chunk_overlap_tokens must be at most half of chunk_tokens"
            )
        return self


class KnowledgeBaseUpdate(Input):
    title: Title | None = None
    description: Description | None = None


class KnowledgeBaseRead(BaseModel):
    id: uuid.UUID
    title: str
    description: str
    language: str
    chunk_tokens: int
    chunk_overlap_tokens: int
    document_count: int
    chunk_count: int
    agent_ids: list[uuid.UUID]
    created_at: datetime
    updated_at: datetime | None


class KnowledgeBaseDetail(KnowledgeBaseRead):
    documents: list[DocumentSummary]


class AgentAssignmentUpdate(Input):
    agent_ids: list[uuid.UUID] = Field(max_length=1000)


class AgentAssignmentRead(BaseModel):
    kb_id: uuid.UUID
    agent_ids: list[uuid.UUID]
