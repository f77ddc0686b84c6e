from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, StringConstraints

from app.schemas import Input


class ApiKeyCreate(Input):
    role: Literal["admin", "query"]
    name: Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)] = ""


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
