from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import BaseModel, StringConstraints

from app.schemas import Input


class AgentSettingsUpdate(Input):
    prompt_variant: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]{1,50}$")] | None


class AgentSettingsRead(BaseModel):
    agent_id: uuid.UUID
    prompt_variant: str | None
    available_variants: list[str]
