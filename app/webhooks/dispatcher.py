"""Delivery of queued webhook events, in the ingestion worker process.

``deliver_due`` leases due deliveries (``FOR UPDATE SKIP LOCKED``, with an expiry, so any
number of workers share the queue and an attempt whose worker died is made again), POSTs
each event signed with its endpoint's secret, and records the outcome: a 2xx answer is
delivered; anything else is retried with exponential backoff and jitter until the attempts
run out, then failed. A URL that no longer passes the SSRF checks (its host now resolves
to a private address) fails at once and nothing is sent.

``WebhookDispatcher.start`` runs ``concurrency`` loops doing that, woken by a notification
on ``WEBHOOK_CHANNEL`` when an event is queued, and otherwise polling.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import WebhookSettings
from app.db.engine import raw_connection
from app.db.leasing import listen, release_leases, sleep_until_woken, stop_loops
from app.ingestion.fetch import (
    BlockedURL,
    FetchError,
    IntranetAccess,
    Resolver,
    pinned_urls,
)
from app.webhooks.repository import (
    CLAIM_SQL,
    DELIVERED_SQL,
    FAILED_SQL,
    PRUNE_SQL,
    RELEASE_SQL,
    RETRY_SQL,
    WEBHOOK_CHANNEL,
)

log = logging.getLogger(__name__)

LISTENER_NAME = "voice-knowledge-webhook-listener"
USER_AGENT = "voice-knowledge-webhooks/1.0"
SIGNATURE_HEADER = "VK-Signature"
TIMESTAMP_HEADER = "VK-Timestamp"
EVENT_ID_HEADER = "VK-Event-Id"
EVENT_TYPE_HEADER = "VK-Event-Type"
DELIVERY_ID_HEADER = "VK-Delivery-Id"
PRUNE_EVERY_S = 600.0


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``v1=`` and the hex HMAC-SHA256 of ``"{timestamp}.{body}"`` keyed with the secret."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"v1={digest}"


def event_body(event_id: uuid.UUID, event_type: str, created_at: datetime, data: Any) -> bytes:
    """The JSON a receiver gets: the same bytes on every attempt of an event."""
    payload = {
        "id": str(event_id),
        "type": event_type,
        "created_at": created_at.isoformat().replace("+00:00", "Z"),
        "data": data,
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Outcome:
    delivery_id: uuid.UUID
    status: str  # delivered, pending (retry later) or failed
    status_code: int | None
    error: str | None


class _Retryable(Exception):
    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class WebhookDispatcher:
    """Delivers webhook events; close with ``stop`` (after ``start``) or ``aclose``.

    ``jitter`` returns a number in [0, 1) that spreads each retry delay over its upper half;
    tests fix it.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        settings: WebhookSettings,
        owner: str,
        *,
        resolver: Resolver | None = None,
        intranet: IntranetAccess | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.owner = owner
        self.resolver = resolver
        self.intranet = intranet
        self.jitter = jitter
        self._client = httpx.AsyncClient(
            # A redirect would lead the signed event to a host nobody checked.
            follow_redirects=False,
            # Environment proxies would connect by name, undoing the address check.
            trust_env=False,
            timeout=httpx.Timeout(settings.timeout_s),
            # Connections are made to checked addresses; none is kept for another host name.
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"User-Agent": USER_AGENT, "Content-Type": "application/json"},
        )
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: list[asyncio.Task[None]] = []
        self._pruning: asyncio.Task[None] | None = None
        self._listener: asyncpg.Connection | None = None

    # --- one pass ---------------------------------------------------------------------------

    async def deliver_due(self, limit: int = 100) -> list[Outcome]:
        """Lease up to ``limit`` due deliveries, make their attempts at once, record each outcome."""
        lease = f"{self.owner}/{uuid.uuid4().hex[:8]}"
        async with raw_connection(self.engine) as conn:
            rows = await conn.fetch(CLAIM_SQL, lease, self.settings.lease_s, limit)
        if not rows:
            return []
        return list(await asyncio.gather(*(self._attempt(row) for row in rows)))

    async def _attempt(self, row: Any) -> Outcome:
        delivery_id: uuid.UUID = row["id"]
        try:
            if row["attempts"] > self.settings.max_attempts:
                # Only a worker that died mid-attempt, repeatedly, gets here.
                outcome = Outcome(delivery_id, "failed", None, "the attempts were interrupted; giving up")
            else:
                outcome = await self._send(row)
        except Exception as exc:  # one broken delivery must not stop the others
            log.exception("webhook delivery %s failed unexpectedly", delivery_id)
            outcome = self._retry_or_fail(row, None, f"internal error ({type(exc).__name__})")
        try:
            await self._record(row, outcome)
        except Exception:  # the lease expires and the attempt is made again
            log.warning(
                "could not record webhook delivery %s; it will be retried", delivery_id, exc_info=True
            )
        return outcome

    async def _send(self, row: Any) -> Outcome:
        delivery_id: uuid.UUID = row["id"]
        body = event_body(
            row["event_id"], row["event_type"], row["event_created_at"], json.loads(row["data"])
        )
        timestamp = int(time.time())
        headers = {
            SIGNATURE_HEADER: signature(row["secret"], timestamp, body),
            TIMESTAMP_HEADER: str(timestamp),
            EVENT_ID_HEADER: str(row["event_id"]),
            EVENT_TYPE_HEADER: row["event_type"],
            DELIVERY_ID_HEADER: str(delivery_id),
        }
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                status = await self._post(row["url"], headers, body)
        except BlockedURL as exc:
            return Outcome(delivery_id, "failed", None, f"the URL cannot be used for a webhook: {exc}")
        except TimeoutError:
            return self._retry_or_fail(row, None, f"no answer within {self.settings.timeout_s:g} s")
        except _Retryable as exc:
            return self._retry_or_fail(row, exc.status_code, str(exc))
        return Outcome(delivery_id, "delivered", status, None)

    async def _post(self, url: str, headers: dict[str, str], body: bytes) -> int:
        """Send to the checked addresses of the URL's host; the 2xx status, or raise."""
        try:
            # A URL stored before control characters were refused: the checks' parser drops
            # them, httpx's does not, and no attempt will ever go through.
            host = httpx.URL(url).host
        except httpx.InvalidURL as exc:
            raise BlockedURL(f"no request can be made of it ({exc})") from exc
        try:
            targets = await pinned_urls(url, resolver=self.resolver, intranet=self.intranet)
        except FetchError as exc:
            raise _Retryable(str(exc)) from exc
        for index, target in enumerate(targets):
            request = self._client.build_request(
                "POST",
                target.url,
                content=body,
                headers={**headers, "Host": target.host_header},
                extensions={"sni_hostname": target.sni_hostname} if target.sni_hostname else {},
            )
            try:
                response = await self._client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                # Nothing reached this address: the next checked one may take it.
                if index < len(targets) - 1:
                    continue
                raise _Retryable(f"could not connect to {host}") from exc
            except httpx.TimeoutException as exc:
                raise _Retryable(f"{host} did not answer in time") from exc
            except httpx.HTTPError as exc:
                raise _Retryable(f"the connection to {host} failed ({type(exc).__name__})") from exc
            # The answer's body is not read: only its status counts.
            await response.aclose()
            if 200 <= response.status_code < 300:
                return response.status_code
            hint = " (redirects are not followed)" if 300 <= response.status_code < 400 else ""
            raise _Retryable(f"the endpoint answered HTTP {response.status_code}{hint}", response.status_code)
        raise _Retryable(f"the host {host} has no addresses")  # pinned_urls never returns none

    def _retry_or_fail(self, row: Any, status_code: int | None, error: str) -> Outcome:
        attempts: int = row["attempts"]
        if attempts >= self.settings.max_attempts:
            return Outcome(row["id"], "failed", status_code, f"{error}; gave up after {attempts} attempts")
        return Outcome(row["id"], "pending", status_code, error)

    def retry_delay_s(self, attempts: int) -> float:
        """After ``attempts`` failed attempts: the base doubled each time, capped, then jittered
        into its upper half so receivers that failed together are not retried together."""
        ceiling = min(self.settings.backoff_max_s, self.settings.backoff_base_s * 2.0 ** (attempts - 1))
        return ceiling * (0.5 + 0.5 * self.jitter())

    async def _record(self, row: Any, outcome: Outcome) -> None:
        error = outcome.error[:2000] if outcome.error else None
        async with raw_connection(self.engine) as conn:
            if outcome.status == "delivered":
                await conn.execute(DELIVERED_SQL, row["id"], row["lease"], outcome.status_code)
            elif outcome.status == "failed":
                await conn.execute(FAILED_SQL, row["id"], row["lease"], outcome.status_code, error)
            else:
                delay = self.retry_delay_s(row["attempts"])
                await conn.execute(RETRY_SQL, row["id"], row["lease"], outcome.status_code, error, delay)

    async def prune(self) -> str:
        """Delete events (and their delivery log) older than the retention period."""
        async with raw_connection(self.engine) as conn:
            result: str = await conn.execute(PRUNE_SQL, self.settings.retention_days)
        return result

    # --- running ----------------------------------------------------------------------------

    def wake(self) -> None:
        self._wake.set()

    async def start(self) -> None:
        self._listener = await listen(
            self.engine,
            WEBHOOK_CHANNEL,
            LISTENER_NAME,
            self._wake,
            what="webhook events",
            poll_s=self.settings.poll_interval_s,
        )
        self._tasks = [
            asyncio.create_task(self._loop(i), name=f"webhooks-{i}") for i in range(self.settings.concurrency)
        ]
        self._pruning = asyncio.create_task(self._prune_loop(), name="webhooks-prune")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop taking work, let attempts under way finish within ``grace_s``, put back the rest."""
        self._stopping = True
        self._wake.set()
        await stop_loops(self._tasks, grace_s=grace_s, listener=self._listener, housekeeping=self._pruning)
        await release_leases(self.engine, RELEASE_SQL, self.owner, what="webhook leases")
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _loop(self, index: int) -> None:
        while not self._stopping:
            try:
                outcomes = await self.deliver_due(1)
            except Exception:
                log.warning("webhook loop %d could not claim deliveries; retrying", index, exc_info=True)
                outcomes = []
            if not outcomes:
                await sleep_until_woken(self._wake, self.settings.poll_interval_s)
                continue
            # More may be due for a loop that just went to sleep.
            self._wake.set()

    async def _prune_loop(self) -> None:
        while True:
            try:
                await self.prune()
            except Exception:
                log.warning("could not prune old webhook events; retrying later", exc_info=True)
            await asyncio.sleep(PRUNE_EVERY_S)
