from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlmodel import Field, SQLModel

from app.db.base import created_at_field, optional_ts_field, parent_fk

STATUSES = ("queued", "running", "completed", "failed", "cancelled")
ACTIVE = ("queued", "running")


class Crawl(SQLModel, table=True):
    """A site crawl of one knowledge base; also its job in the crawl queue (migration 0012)."""

    __tablename__ = "crawls"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    kb_id: uuid.UUID = parent_fk("knowledge_bases.id")
    start_url: str = Field(max_length=2048)
    max_depth: int
    max_pages: int
    include_patterns: list[str] = Field(default_factory=list, sa_column=Column(ARRAY(Text), nullable=False))
    exclude_patterns: list[str] = Field(default_factory=list, sa_column=Column(ARRAY(Text), nullable=False))
    use_sitemap: bool = True
    sync_interval_s: int | None = None
    next_run_at: datetime | None = optional_ts_field()
    status: str = Field(default="queued", max_length=16)
    cancel_requested: bool = False
    pages_found: int = 0
    pages_read: int = 0
    pages_unchanged: int = 0
    pages_failed: int = 0
    pages_skipped: int = 0
    pages_retired: int = 0
    problems: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSONB, nullable=False))
    error: str | None = Field(default=None, max_length=2000)
    attempts: int = 0
    lease_owner: str | None = Field(default=None, max_length=100)
    lease_expires_at: datetime | None = optional_ts_field()
    created_at: datetime = created_at_field()
    updated_at: datetime | None = optional_ts_field()
    started_at: datetime | None = optional_ts_field()
    finished_at: datetime | None = optional_ts_field()
