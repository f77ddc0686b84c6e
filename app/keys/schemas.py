from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from app.schemas import Input, Name


class ApiKeyCreate(Input):
    role: Literal["admin", "query"]
    name: Name = ""


class ApiKeyRead(BaseModel):
    id: uuid.UUID
    name: str
    prefix: str
    role: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyRead):
    key: str
