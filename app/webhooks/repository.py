"""SQL for webhooks. The API's queries are scoped to the organisation in ``_endpoints`` and
``_deliveries``; the dispatcher's queue statements below run on raw asyncpg connections, as
the ingestion queue's do (app/ingestion/repository.py)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Select

from app.organisations.models import Organisation
from app.webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent

ENDPOINT = WebhookEndpoint.__table__  # type: ignore[attr-defined]
DELIVERY = WebhookDelivery.__table__  # type: ignore[attr-defined]
EVENT = WebhookEvent.__table__  # type: ignore[attr-defined]

# The worker listens here; enqueue_webhook_event (migration 0014) notifies it too.
WEBHOOK_CHANNEL = "vk_webhooks"


class WebhookRepository:
    def __init__(self, session: AsyncSession, org_id: uuid.UUID) -> None:
        self.session = session
        self.org_id = org_id

    def _endpoints(self, stmt: Select[Any]) -> Select[Any]:
        return stmt.where(ENDPOINT.c.org_id == self.org_id)

    def _deliveries(self, stmt: Select[Any], endpoint_id: uuid.UUID) -> Select[Any]:
        return stmt.where(DELIVERY.c.org_id == self.org_id, DELIVERY.c.endpoint_id == endpoint_id)

    async def page(self, *, limit: int, offset: int) -> tuple[list[WebhookEndpoint], int]:
        rows = await self.session.scalars(
            self._endpoints(select(WebhookEndpoint))
            .order_by(ENDPOINT.c.created_at, ENDPOINT.c.id)
            .limit(limit)
            .offset(offset)
        )
        total = await self.session.scalar(self._endpoints(select(func.count()).select_from(ENDPOINT)))
        return list(rows), int(total or 0)

    async def get(self, endpoint_id: uuid.UUID, *, for_update: bool = False) -> WebhookEndpoint | None:
        stmt = self._endpoints(select(WebhookEndpoint)).where(ENDPOINT.c.id == endpoint_id)
        if for_update:
            stmt = stmt.with_for_update()
        result: WebhookEndpoint | None = await self.session.scalar(stmt)
        return result

    async def lock_organisation(self) -> None:
        """Lock the organisation's row until commit, so concurrent registrations count the
        endpoints one after another (NO KEY UPDATE, as for the storage quota of documents)."""
        await self.session.execute(
            select(Organisation.id)  # type: ignore[call-overload]
            .where(Organisation.id == self.org_id)
            .with_for_update(key_share=True)
        )

    def add(self, endpoint: WebhookEndpoint) -> None:
        endpoint.org_id = self.org_id
        self.session.add(endpoint)

    async def delete(self, endpoint: WebhookEndpoint) -> None:
        await self.session.delete(endpoint)

    async def fail_waiting(self, endpoint_id: uuid.UUID, reason: str) -> None:
        """Mark the endpoint's deliveries not yet under way as failed with ``reason``."""
        await self.session.execute(
            update(WebhookDelivery)
            .where(DELIVERY.c.org_id == self.org_id, DELIVERY.c.endpoint_id == endpoint_id)
            # Attempts under way are the worker's to record; one whose worker vanished is not.
            .where(
                (DELIVERY.c.status == "pending")
                | ((DELIVERY.c.status == "delivering") & (DELIVERY.c.lease_expires_at < func.now()))
            )
            .values(status="failed", last_error=reason, finished_at=func.now(), lease_owner=None)
        )

    async def delivery_page(
        self, endpoint_id: uuid.UUID, *, status: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """The endpoint's deliveries, newest first, with their event's type."""
        stmt = self._deliveries(
            select(*DELIVERY.c, EVENT.c.type.label("event_type")).join(
                EVENT, EVENT.c.id == DELIVERY.c.event_id
            ),
            endpoint_id,
        )
        count = self._deliveries(select(func.count()).select_from(DELIVERY), endpoint_id)
        if status is not None:
            stmt = stmt.where(DELIVERY.c.status == status)
            count = count.where(DELIVERY.c.status == status)
        rows = await self.session.execute(
            stmt.order_by(DELIVERY.c.created_at.desc(), DELIVERY.c.id.desc()).limit(limit).offset(offset)
        )
        total = await self.session.scalar(count)
        return [dict(row) for row in rows.mappings()], int(total or 0)

    async def get_delivery(self, endpoint_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery | None:
        stmt = self._deliveries(select(WebhookDelivery), endpoint_id).where(DELIVERY.c.id == delivery_id)
        result: WebhookDelivery | None = await self.session.scalar(stmt)
        return result

    async def add_event(self, event_type: str, data: dict[str, Any]) -> uuid.UUID:
        # Times come from the database, as for the events its trigger writes.
        event_id: uuid.UUID = await self.session.scalar(
            insert(EVENT).values(org_id=self.org_id, type=event_type, data=data).returning(EVENT.c.id)
        )
        return event_id

    async def add_delivery(self, endpoint_id: uuid.UUID, event_id: uuid.UUID) -> dict[str, Any]:
        """Queue one delivery, due now, and wake the workers when the transaction commits."""
        result = await self.session.execute(
            insert(DELIVERY)
            .values(org_id=self.org_id, endpoint_id=endpoint_id, event_id=event_id)
            .returning(*DELIVERY.c)
        )
        row = dict(result.mappings().one())
        await self.session.execute(text("SELECT pg_notify(:channel, '')"), {"channel": WEBHOOK_CHANNEL})
        return row

    async def event_type(self, event_id: uuid.UUID) -> str:
        result = await self.session.execute(
            select(EVENT.c.type).where(EVENT.c.org_id == self.org_id, EVENT.c.id == event_id)
        )
        value: str = result.scalar_one()
        return value


# --- the delivery queue (raw asyncpg) -------------------------------------------------------

# Due deliveries of active endpoints, and attempts whose worker vanished (expired lease).
# Those of organisations with the fewest attempts in flight come first, then by due time: one
# organisation's endpoints that never answer hold a slot each for the whole timeout, and by
# due time alone its hundreds of retries kept every other organisation's deliveries waiting
# (four minutes, measured). Now a freed slot goes to the others first.
# No endpoint can give more than $3 of the $3 taken, so each offers only its earliest (twice
# $3: another worker may hold some of them), read in order from its index: sorting every due
# delivery on each poll cost 37 ms of the database's time a claim at 30,000 due (a burst of
# events), and the sort grew with the queue. (A delivery is due when claimed, so every
# candidate has next_attempt_at <= now().)
CLAIM_SQL = """
WITH busy AS (
    SELECT org_id, count(*) AS in_flight FROM webhook_deliveries
    WHERE status = 'delivering' AND lease_expires_at >= now()
    GROUP BY org_id
), candidates AS (
    SELECT c.id, c.next_attempt_at, coalesce(b.in_flight, 0) AS in_flight
    FROM webhook_endpoints e
    LEFT JOIN busy b ON b.org_id = e.org_id
    CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.endpoint_id = e.id
          AND d.status IN ('pending', 'delivering') AND d.next_attempt_at <= now()
          AND (d.status = 'pending' OR d.lease_expires_at < now())
        ORDER BY d.next_attempt_at
        LIMIT 2 * $3
    ) c
    WHERE e.active
), picked AS (
    SELECT d.id FROM webhook_deliveries d
    JOIN candidates c ON c.id = d.id
    -- Checked again on the row locked: a worker that claimed it since this statement began
    -- has made it 'delivering' under a live lease, and only the row itself shows that.
    WHERE (d.status = 'pending' AND d.next_attempt_at <= now())
       OR (d.status = 'delivering' AND d.lease_expires_at < now())
    ORDER BY c.in_flight, c.next_attempt_at
    FOR UPDATE OF d SKIP LOCKED
    LIMIT $3
)
UPDATE webhook_deliveries d
SET status = 'delivering', attempts = d.attempts + 1, lease_owner = $1,
    lease_expires_at = now() + make_interval(secs => $2), last_attempt_at = now()
FROM picked, webhook_endpoints e, webhook_events ev
WHERE d.id = picked.id AND e.id = d.endpoint_id AND ev.id = d.event_id
RETURNING d.id, d.lease_owner AS lease, d.attempts, e.url, e.secret, ev.id AS event_id,
          ev.type AS event_type, ev.data::text AS data, ev.created_at AS event_created_at
"""

DELIVERED_SQL = """
UPDATE webhook_deliveries
SET status = 'delivered', last_status_code = $3, last_error = NULL, finished_at = now(),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2 AND status = 'delivering'
"""

RETRY_SQL = """
UPDATE webhook_deliveries
SET status = 'pending', last_status_code = $3, last_error = $4,
    next_attempt_at = now() + make_interval(secs => $5), lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2 AND status = 'delivering'
"""

FAILED_SQL = """
UPDATE webhook_deliveries
SET status = 'failed', last_status_code = $3, last_error = $4, finished_at = now(),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2 AND status = 'delivering'
"""

# On shutdown: attempts in hand go back to the queue, not counted, for another worker.
RELEASE_SQL = """
UPDATE webhook_deliveries
SET status = 'pending', lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0),
    next_attempt_at = now()
WHERE starts_with(lease_owner, $1 || '/') AND status = 'delivering'
"""

# Old events go with their delivery log, unless a delivery is still under way.
PRUNE_SQL = """
DELETE FROM webhook_events ev
WHERE ev.created_at < now() - make_interval(days => $1)
  AND NOT EXISTS (
      SELECT 1 FROM webhook_deliveries d
      WHERE d.event_id = ev.id AND d.status IN ('pending', 'delivering')
  )
"""
