from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Column, ForeignKey
from sqlalchemy.dialects.postgresql import UUID
from sqlmodel import Field, SQLModel

from app.db.base import created_at_field, optional_ts_field, parent_fk


class KnowledgeBase(SQLModel, table=True):
    __tablename__ = "knowledge_bases"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    title: str = Field(max_length=200)
    description: str = Field(default="", max_length=2000)
    # Full-text configuration (a PostgreSQL regconfig name) used for this KB's chunks.
    language: str = Field(default="english", max_length=64)
    chunk_tokens: int = 500
    chunk_overlap_tokens: int = 60
    # Bumped on every change to the KB's searchable content; part of the answer-cache key.
    content_version: int = 0
    chunk_count: int = 0
    created_at: datetime = created_at_field()
    updated_at: datetime | None = optional_ts_field()


class AgentAssignment(SQLModel, table=True):
    __tablename__ = "agent_assignments"

    kb_id: uuid.UUID = Field(
        sa_column=Column(
            UUID(as_uuid=True),
            ForeignKey("knowledge_bases.id", ondelete="CASCADE"),
            primary_key=True,
        )
    )
    agent_id: uuid.UUID = Field(primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    created_at: datetime = created_at_field()
