from __future__ import annotations

import uuid
from datetime import datetime

from sqlmodel import Field, SQLModel

from app.db.base import created_at_field


class Organisation(SQLModel, table=True):
    __tablename__ = "organisations"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    name: str = Field(max_length=200)
    created_at: datetime = created_at_field()
