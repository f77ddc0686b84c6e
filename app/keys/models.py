from __future__ import annotations

import uuid
from datetime import datetime

from sqlmodel import Field, SQLModel

from app.db.base import created_at_field, optional_ts_field, parent_fk


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    name: str = Field(default="", max_length=200)
    prefix: str = Field(max_length=32)
    # SHA-256 of the whole key. Keys are 256-bit random secrets, so a fast hash is safe
    # here (no dictionary to attack) and keeps authentication off the CPU on the hot path.
    key_hash: bytes
    role: str = Field(max_length=16)
    created_at: datetime = created_at_field()
    last_used_at: datetime | None = optional_ts_field()
    revoked_at: datetime | None = optional_ts_field()
