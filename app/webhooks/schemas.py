from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from app.schemas import Description, Input, Url

EventName = Literal["document.status_changed", "crawl.completed", "*"]


def _distinct(events: list[EventName]) -> list[EventName]:
    # "*" already covers every type, so a list holding it is stored as "*" alone.
    return ["*"] if "*" in events else list(dict.fromkeys(events))


def _refuse_non_booleans(value: object) -> object:
    """JSON's true and false only: lax mode (which Litestar asks for) reads "yes" and 1 as true."""
    if not isinstance(value, bool):
        raise PydanticCustomError("bool_type", "Input should be a valid boolean")
    return value


JsonBoolean = Annotated[bool, BeforeValidator(_refuse_non_booleans)]


def _all_events() -> list[EventName]:
    return ["*"]


Events = Annotated[
    list[EventName],
    Field(
        min_length=1,
        max_length=10,
        description="Event types to receive: `document.status_changed`, `crawl.completed`, or `*` for all.",
    ),
    AfterValidator(_distinct),
]


class WebhookCreate(Input):
    url: Url
    description: Description = ""
    events: Events = Field(default_factory=_all_events)
    active: JsonBoolean = True


class WebhookUpdate(Input):
    url: Url | None = None
    description: Description | None = None
    events: Events | None = None
    active: JsonBoolean | None = Field(
        None, description="false stops deliveries at once: those still waiting are marked failed."
    )


class WebhookRead(BaseModel):
    id: uuid.UUID
    url: str
    description: str
    events: list[str]
    active: bool
    created_at: datetime
    updated_at: datetime | None


class WebhookWithSecret(WebhookRead):
    secret: str = Field(
        description="Signs every delivery (docs/WEBHOOKS.md). Shown in this response only: store it now."
    )


class DeliveryRead(BaseModel):
    id: uuid.UUID
    event_id: uuid.UUID
    event_type: str
    status: Literal["pending", "delivering", "delivered", "failed"]
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    last_attempt_at: datetime | None
    next_attempt_at: datetime | None = Field(description="When the next attempt is due; null once finished.")
    finished_at: datetime | None
