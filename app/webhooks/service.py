"""Webhook endpoints of an organisation: registered, changed, tested, and their delivery log.

The signing secret is made here from 256 random bits and shown twice only: in the answer
that creates the endpoint and in the one that rotates it. Deliveries themselves are the
worker's (app/webhooks/dispatcher.py); this service only queues them.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import utcnow
from app.errors import BadRequest, Conflict, NotFound, QuotaExceeded
from app.ingestion.fetch import BlockedURL
from app.schemas import Page
from app.webhooks.models import PING, WebhookEndpoint
from app.webhooks.repository import WebhookRepository
from app.webhooks.schemas import (
    DeliveryRead,
    WebhookCreate,
    WebhookRead,
    WebhookUpdate,
    WebhookWithSecret,
)

UrlValidator = Callable[[str], Awaitable[None]]

SECRET_PREFIX = "whsec_"  # noqa: S105 - a marker, not a secret
MAX_ENDPOINTS = 20
NOT_FOUND = "webhook not found"
DISABLED_REASON = "the webhook was disabled before this delivery was made"


def generate_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def to_read(endpoint: WebhookEndpoint) -> WebhookRead:
    return WebhookRead.model_validate(endpoint, from_attributes=True)


def with_secret(endpoint: WebhookEndpoint) -> WebhookWithSecret:
    return WebhookWithSecret(**to_read(endpoint).model_dump(), secret=endpoint.secret)


def delivery_read(row: dict[str, Any]) -> DeliveryRead:
    finished = row["status"] in {"delivered", "failed"}
    return DeliveryRead(**{**row, "next_attempt_at": None if finished else row["next_attempt_at"]})


class WebhookService:
    """Register, change, remove and test an organisation's webhook endpoints."""

    def __init__(self, session: AsyncSession, org_id: uuid.UUID, *, validate_url: UrlValidator) -> None:
        self.session = session
        self.repo = WebhookRepository(session, org_id)
        self.validate_url = validate_url

    async def _checked_url(self, url: str) -> str:
        # The same checks as a URL document's, again before every delivery: DNS may change.
        try:
            await self.validate_url(url)
        except BlockedURL as exc:
            raise BadRequest(f"this URL cannot be used for a webhook: {exc}") from exc
        return url

    async def _require(self, endpoint_id: uuid.UUID, *, for_update: bool = False) -> WebhookEndpoint:
        endpoint = await self.repo.get(endpoint_id, for_update=for_update)
        if endpoint is None:
            raise NotFound(NOT_FOUND)
        return endpoint

    async def page(self, *, limit: int, offset: int) -> Page[WebhookRead]:
        rows, total = await self.repo.page(limit=limit, offset=offset)
        return Page(items=[to_read(r) for r in rows], total=total, limit=limit, offset=offset)

    async def create(self, data: WebhookCreate) -> WebhookWithSecret:
        url = await self._checked_url(data.url)
        await self.repo.lock_organisation()
        _, total = await self.repo.page(limit=1, offset=0)
        if total >= MAX_ENDPOINTS:
            raise QuotaExceeded(f"an organisation may register at most {MAX_ENDPOINTS} webhooks")
        endpoint = WebhookEndpoint(
            org_id=self.repo.org_id,
            url=url,
            description=data.description,
            events=list[str](data.events),
            active=data.active,
            secret=generate_secret(),
        )
        self.repo.add(endpoint)
        await self.session.commit()
        return with_secret(endpoint)

    async def get(self, endpoint_id: uuid.UUID) -> WebhookRead:
        return to_read(await self._require(endpoint_id))

    async def update(self, endpoint_id: uuid.UUID, data: WebhookUpdate) -> WebhookRead:
        await self._require(endpoint_id)  # another organisation's id is a 404 before any URL check
        # Resolved before the row is locked: a slow DNS answer must not hold the lock.
        url = await self._checked_url(data.url) if data.url is not None else None
        endpoint = await self._require(endpoint_id, for_update=True)
        if url is not None:
            endpoint.url = url
        if data.description is not None:
            endpoint.description = data.description
        if data.events is not None:
            endpoint.events = list[str](data.events)
        if data.active is not None:
            endpoint.active = data.active
            if not data.active:
                await self.repo.fail_waiting(endpoint_id, DISABLED_REASON)
        endpoint.updated_at = utcnow()
        await self.session.commit()
        return to_read(endpoint)

    async def rotate_secret(self, endpoint_id: uuid.UUID) -> WebhookWithSecret:
        """A new secret, used from the next attempt on; the old one stops signing at once."""
        endpoint = await self._require(endpoint_id, for_update=True)
        endpoint.secret = generate_secret()
        endpoint.updated_at = utcnow()
        await self.session.commit()
        return with_secret(endpoint)

    async def delete(self, endpoint_id: uuid.UUID) -> None:
        await self.repo.delete(await self._require(endpoint_id, for_update=True))
        await self.session.commit()

    async def deliveries(
        self, endpoint_id: uuid.UUID, *, status: str | None, limit: int, offset: int
    ) -> Page[DeliveryRead]:
        await self._require(endpoint_id)
        rows, total = await self.repo.delivery_page(endpoint_id, status=status, limit=limit, offset=offset)
        return Page(items=[delivery_read(r) for r in rows], total=total, limit=limit, offset=offset)

    async def ping(self, endpoint_id: uuid.UUID) -> DeliveryRead:
        """Queue a ``ping`` event to this endpoint alone, whatever it subscribed to."""
        endpoint = await self._require_active(endpoint_id)
        event_id = await self.repo.add_event(PING, {"webhook_id": str(endpoint.id)})
        return await self._queued(endpoint, event_id, PING)

    async def redeliver(self, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> DeliveryRead:
        """Send a delivery's event again, as a new delivery with its own attempts.

        The event keeps its id, so a receiver that already handled it can tell."""
        endpoint = await self._require_active(endpoint_id)
        previous = await self.repo.get_delivery(endpoint_id, delivery_id)
        if previous is None:
            raise NotFound("delivery not found")
        return await self._queued(endpoint, previous.event_id, await self.repo.event_type(previous.event_id))

    async def _require_active(self, endpoint_id: uuid.UUID) -> WebhookEndpoint:
        # Locked against a concurrent disable, which fails the deliveries it finds waiting.
        endpoint = await self._require(endpoint_id, for_update=True)
        if not endpoint.active:
            raise Conflict("this webhook is disabled; enable it (active: true) first")
        return endpoint

    async def _queued(self, endpoint: WebhookEndpoint, event_id: uuid.UUID, event_type: str) -> DeliveryRead:
        row = await self.repo.add_delivery(endpoint.id, event_id)
        await self.session.commit()
        return delivery_read({**row, "event_type": event_type})
