from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from app.schemas import Description, Input, LongTitle, Url

# Content is stored as bytes and cleaned by extraction, so NUL is accepted here (unlike
# the short text fields, see app.schemas.NoNul).
Content = Annotated[str, StringConstraints(min_length=1)]


class DocumentCreateText(Input):
    title: LongTitle
    description: Description = ""
    content: Content
    content_type: Literal["text", "markdown", "html"] = "text"


class DocumentCreateUrl(Input):
    url: Url
    title: LongTitle | None = None
    description: Description = ""
    sync_interval_s: int | None = Field(None, ge=0, le=30 * 86_400, description="0 = never re-sync")


class DocumentUpdate(Input):
    title: LongTitle | None = None
    description: Description | None = None
    content: Content | None = None
    content_type: Literal["text", "markdown", "html"] | None = None


class Progress(BaseModel):
    done: int
    total: int


class DocumentSummary(BaseModel):
    id: uuid.UUID
    title: str
    description: str
    source_kind: str
    status: str
    chunk_count: int
    created_at: datetime
    updated_at: datetime | None
    indexed_at: datetime | None


class DocumentRead(DocumentSummary):
    kb_id: uuid.UUID
    source_url: str | None
    file_name: str | None
    content_hash: str | None
    error: str | None
    progress: Progress
    pages_total: int | None
    pages_skipped: int
    attempts: int
