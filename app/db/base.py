"""Column helpers shared by the SQLModel tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, ForeignKey
from sqlalchemy.dialects.postgresql import UUID
from sqlmodel import Field


def utcnow() -> datetime:
    return datetime.now(UTC)


def created_at_field() -> Any:
    return Field(default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False))


def optional_ts_field() -> Any:
    return Field(default=None, sa_column=Column(DateTime(timezone=True), nullable=True))


def parent_fk(target: str) -> Any:
    """A UUID foreign key whose rows go when the parent goes (ON DELETE CASCADE)."""
    return Field(sa_column=Column(UUID(as_uuid=True), ForeignKey(target, ondelete="CASCADE"), nullable=False))
