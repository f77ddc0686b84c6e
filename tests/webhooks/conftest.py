"""Webhook test pieces: a dispatcher on the test's engine, a resolver tests can repoint, and
a receiver check that recomputes each delivery's signature independently of the app."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.config import WebhookSettings
from app.webhooks.dispatcher import WebhookDispatcher
from tests.conftest import PUBLIC_IP

RECEIVER_HOST = "hooks.example.com"
RECEIVER_URL = f"https://{RECEIVER_HOST}/vk"
# What the dispatcher connects to: the checked address, the name kept for Host and TLS.
RECEIVER_ADDRESS_URL = f"https://{PUBLIC_IP}/vk"
SETTINGS = WebhookSettings(
    max_attempts=3, backoff_base_s=60.0, backoff_max_s=600.0, timeout_s=5.0, lease_s=30.0
)


class Resolver:
    """Answers every host with ``answers``; a test changes them to play a DNS change."""

    def __init__(self) -> None:
        self.answers = [PUBLIC_IP]
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return list(self.answers)


@pytest.fixture
def resolver() -> Resolver:
    return Resolver()


@pytest.fixture
async def dispatcher(engine: Any, resolver: Resolver) -> AsyncIterator[WebhookDispatcher]:
    # Jitter fixed in the middle: each retry delay is exactly 0.75 of its ceiling.
    dispatcher = WebhookDispatcher(engine, SETTINGS, "test-dispatcher", resolver=resolver, jitter=lambda: 0.5)
    yield dispatcher
    await dispatcher.aclose()


async def register(client: Any, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    payload = {"url": RECEIVER_URL, **fields}
    r = await client.post("/api/webhooks", json=payload, headers=headers)
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def received(request: httpx.Request, secret: str) -> dict[str, Any]:
    """Check one delivery as a receiver would, and return its parsed body.

    The signature is recomputed here from the documented recipe, not with the app's code.
    """
    assert request.method == "POST"
    assert str(request.url) == RECEIVER_ADDRESS_URL
    assert request.headers["host"] == RECEIVER_HOST
    assert request.extensions["sni_hostname"] == RECEIVER_HOST
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == "voice-knowledge-webhooks/1.0"
    timestamp = request.headers["vk-timestamp"]
    assert timestamp.isdigit()
    expected = hmac.new(
        secret.encode(), f"{timestamp}.".encode() + request.content, hashlib.sha256
    ).hexdigest()
    assert request.headers["vk-signature"] == f"v1={expected}"
    body: dict[str, Any] = json.loads(request.content)
    assert request.headers["vk-event-id"] == body["id"]
    assert request.headers["vk-event-type"] == body["type"]
    assert set(body) == {"id", "type", "created_at", "data"}
    return body


async def delivery_rows(engine: Any, webhook_id: str) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT d.*, ev.type AS event_type, ev.data AS event_data FROM webhook_deliveries d"
                " JOIN webhook_events ev ON ev.id = d.event_id"
                " WHERE d.endpoint_id = :e ORDER BY d.created_at, d.id"
            ),
            {"e": webhook_id},
        )
        return [dict(r) for r in rows.mappings()]


async def make_due(engine: Any) -> None:
    """Bring every waiting retry forward to now, as time passing would."""
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending'")
        )
