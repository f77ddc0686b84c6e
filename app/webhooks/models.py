from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlmodel import Field, SQLModel

from app.db.base import created_at_field, optional_ts_field, parent_fk

EVENT_TYPES = ("document.status_changed", "crawl.completed")
ALL_EVENTS = "*"
# Sent to one endpoint on request, whatever it subscribed to.
PING = "ping"
DELIVERY_STATUSES = ("pending", "delivering", "delivered", "failed")


class WebhookEndpoint(SQLModel, table=True):
    __tablename__ = "webhook_endpoints"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    url: str = Field(max_length=2048)
    description: str = Field(default="", max_length=2000)
    events: list[str] = Field(sa_column=Column(ARRAY(Text), nullable=False))
    active: bool = True
    # Kept in the clear: every delivery is signed with it.
    secret: str = Field(max_length=100)
    created_at: datetime = created_at_field()
    updated_at: datetime | None = optional_ts_field()


class WebhookEvent(SQLModel, table=True):
    __tablename__ = "webhook_events"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    type: str = Field(max_length=100)
    data: dict[str, Any] = Field(sa_column=Column(JSONB, nullable=False))
    created_at: datetime = created_at_field()


class WebhookDelivery(SQLModel, table=True):
    __tablename__ = "webhook_deliveries"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    org_id: uuid.UUID = parent_fk("organisations.id")
    endpoint_id: uuid.UUID = parent_fk("webhook_endpoints.id")
    event_id: uuid.UUID = parent_fk("webhook_events.id")
    status: str = Field(default="pending", max_length=16)
    attempts: int = 0
    next_attempt_at: datetime = created_at_field()
    lease_owner: str | None = Field(default=None, max_length=100)
    lease_expires_at: datetime | None = optional_ts_field()
    last_status_code: int | None = None
    last_error: str | None = Field(default=None, max_length=2000)
    created_at: datetime = created_at_field()
    last_attempt_at: datetime | None = optional_ts_field()
    finished_at: datetime | None = optional_ts_field()
