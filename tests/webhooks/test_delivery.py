"""Events into the outbox (the document trigger, enqueue_webhook_event) and out of it
(the dispatcher): every delivery goes to respx, which checks what a receiver would."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from app.ingestion.fetch import IntranetAccess
from app.main import create_app
from app.webhooks.dispatcher import WebhookDispatcher
from tests.conftest import fake_resolver
from tests.helpers import create_kb, create_text_doc, served
from tests.webhooks.conftest import (
    RECEIVER_ADDRESS_URL,
    RECEIVER_URL,
    SETTINGS,
    delivery_rows,
    make_due,
    received,
    register,
)

# Routes are asserted one by one; a route that must stay uncalled is part of the test.
pytestmark = pytest.mark.respx(assert_all_called=False)


async def _events(engine, org_id):
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT id, type, data FROM webhook_events WHERE org_id = :o ORDER BY created_at"),
            {"o": org_id},
        )
        return [dict(r) for r in rows.mappings()]


async def _enqueue(engine, org_id, event_type, data):
    async with engine.begin() as conn:
        return (
            await conn.execute(
                text("SELECT enqueue_webhook_event(:o, :t, CAST(:d AS jsonb))"),
                {"o": org_id, "t": event_type, "d": json.dumps(data)},
            )
        ).scalar_one()


# --- into the outbox ------------------------------------------------------------------------


async def test_a_processed_document_reports_each_status_change(
    client, org, engine, drain_queue, dispatcher, respx_mock
):
    hook = await register(client, org.headers, events=["document.status_changed"])
    kb = await create_kb(client, org.headers)
    doc = await create_text_doc(client, org.headers, kb["id"], content="# Hours\nWe open at nine every day.")
    assert await drain_queue() == {"ready": 1}

    common = {"document_id": doc["id"], "knowledge_base_id": kb["id"], "title": "Opening hours"}
    common |= {"error": None, "pages_total": None, "pages_skipped": 0}
    expected = [
        {**common, "status": "pending", "previous_status": None, "chunk_count": 0},
        {**common, "status": "processing", "previous_status": "pending", "chunk_count": 0},
        {**common, "status": "ready", "previous_status": "processing", "chunk_count": 1},
    ]
    events = await _events(engine, org.id)
    assert [e["type"] for e in events] == ["document.status_changed"] * 3
    assert [e["data"] for e in events] == expected

    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(200))
    outcomes = await dispatcher.deliver_due()
    assert sorted(o.status for o in outcomes) == ["delivered"] * 3
    bodies = sorted(
        (received(call.request, hook["secret"]) for call in route.calls), key=lambda b: b["created_at"]
    )
    assert [b["data"] for b in bodies] == expected
    assert [b["id"] for b in bodies] == [str(e["id"]) for e in events]
    assert {b["type"] for b in bodies} == {"document.status_changed"}
    rows = await delivery_rows(engine, hook["id"])
    assert [(r["status"], r["attempts"], r["last_status_code"], r["last_error"]) for r in rows] == [
        ("delivered", 1, 200, None)
    ] * 3


async def test_a_failed_document_reports_its_reason(client, org, engine, drain_queue):
    await register(client, org.headers)
    kb = await create_kb(client, org.headers)
    await create_text_doc(
        client,
        org.headers,
        kb["id"],
        content="<html><body><script>x()</script></body></html>",
        content_type="html",
    )
    assert await drain_queue() == {"failed": 1}
    last = (await _events(engine, org.id))[-1]["data"]
    assert (last["status"], last["previous_status"], last["error"]) == (
        "failed",
        "processing",
        "no text found",
    )


async def test_no_event_is_stored_without_a_subscribed_active_webhook(
    client, org, other_org, engine, drain_queue
):
    await register(client, org.headers, events=["crawl.completed"])
    await register(client, org.headers, active=False)
    # Another organisation's webhook hears nothing of this one's documents.
    await register(client, other_org.headers)
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 1}
    async with engine.connect() as conn:
        counts = (
            await conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM webhook_events), (SELECT count(*) FROM webhook_deliveries)"
                )
            )
        ).one()
    assert tuple(counts) == (0, 0)


async def test_enqueue_function_fans_out_to_subscribed_active_webhooks(
    client, org, other_org, engine, dispatcher, respx_mock
):
    crawls = await register(client, org.headers, events=["crawl.completed"])
    everything = await register(client, org.headers, events=["*"])
    await register(client, org.headers, events=["document.status_changed"])
    await register(client, org.headers, active=False)
    await register(client, other_org.headers, events=["document.status_changed"])
    data = {"crawl_id": str(uuid.uuid4()), "pages": 12, "failed": ["https://example.com/x"]}

    event_id = await _enqueue(engine, org.id, "crawl.completed", data)

    assert isinstance(event_id, uuid.UUID)
    async with engine.connect() as conn:
        targets = await conn.execute(
            text("SELECT endpoint_id::text, status FROM webhook_deliveries WHERE event_id = :e"),
            {"e": event_id},
        )
        assert sorted(tuple(t) for t in targets) == sorted(
            [(crawls["id"], "pending"), (everything["id"], "pending")]
        )

    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(204))
    assert [o.status for o in await dispatcher.deliver_due()] == ["delivered"] * 2
    secrets = {crawls["secret"], everything["secret"]}
    for call in route.calls:
        signed_with = [
            s for s in secrets if call.request.headers["vk-delivery-id"] and _signed(call.request, s)
        ]
        assert len(signed_with) == 1
        body = received(call.request, signed_with[0])
        assert (body["id"], body["type"], body["data"]) == (str(event_id), "crawl.completed", data)
        secrets -= set(signed_with)
    assert secrets == set()

    # Where no active webhook subscribed to the type, nothing is stored and NULL comes back.
    assert await _enqueue(engine, other_org.id, "crawl.completed", data) is None
    assert [e["id"] for e in await _events(engine, other_org.id)] == []


def _signed(request, secret):
    try:
        received(request, secret)
    except AssertionError:
        return False
    return True


# --- out of it ------------------------------------------------------------------------------


async def _ping(client, org, hook):
    r = await client.post(f"/api/webhooks/{hook['id']}/ping", headers=org.headers)
    assert r.status_code == 202, r.text
    return r.json()


async def test_a_ping_is_delivered_signed(client, org, engine, dispatcher, respx_mock, resolver):
    hook = await register(client, org.headers, events=["crawl.completed"])
    queued = await _ping(client, org, hook)
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(202))

    (outcome,) = await dispatcher.deliver_due()

    assert (outcome.delivery_id, outcome.status, outcome.status_code) == (
        uuid.UUID(queued["id"]),
        "delivered",
        202,
    )
    body = received(route.calls.last.request, hook["secret"])
    assert (body["id"], body["type"], body["data"]) == (
        queued["event_id"],
        "ping",
        {"webhook_id": hook["id"]},
    )
    assert route.calls.last.request.headers["vk-delivery-id"] == queued["id"]
    # The host was resolved and checked at this delivery, not only at registration.
    assert resolver.calls == [("hooks.example.com", 443)]
    log = (await client.get(f"/api/webhooks/{hook['id']}/deliveries", headers=org.headers)).json()
    (entry,) = log["items"]
    assert (entry["status"], entry["attempts"], entry["last_status_code"], entry["last_error"]) == (
        "delivered",
        1,
        202,
        None,
    )
    assert entry["next_attempt_at"] is None
    assert entry["finished_at"] is not None
    assert await dispatcher.deliver_due() == []


async def test_after_rotation_deliveries_are_signed_with_the_new_secret(client, org, dispatcher, respx_mock):
    hook = await register(client, org.headers)
    await _ping(client, org, hook)
    rotated = (await client.post(f"/api/webhooks/{hook['id']}/rotate-secret", headers=org.headers)).json()
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(200))
    assert [o.status for o in await dispatcher.deliver_due()] == ["delivered"]
    received(route.calls.last.request, rotated["secret"])
    assert not _signed(route.calls.last.request, hook["secret"])


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (httpx.Response(500), "the endpoint answered HTTP 500"),
        (httpx.ReadTimeout("read timed out"), "hooks.example.com did not answer in time"),
        (
            httpx.Response(301, headers={"Location": "https://elsewhere.example.com/"}),
            "the endpoint answered HTTP 301 (redirects are not followed)",
        ),
    ],
    ids=["500", "timeout", "redirect"],
)
async def test_a_failed_attempt_is_retried_after_a_backoff(
    client, org, engine, dispatcher, respx_mock, failure, error
):
    hook = await register(client, org.headers)
    await _ping(client, org, hook)
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(side_effect=[failure, httpx.Response(200)])

    (first,) = await dispatcher.deliver_due()

    assert (first.status, first.error) == ("pending", error)
    (row,) = await delivery_rows(engine, hook["id"])
    status_code = failure.status_code if isinstance(failure, httpx.Response) else None
    assert (row["status"], row["attempts"], row["last_status_code"], row["last_error"]) == (
        "pending",
        1,
        status_code,
        error,
    )
    # 60 s after the first failure, at 0.75 of it with the jitter fixed: not due yet.
    assert (row["next_attempt_at"] - row["last_attempt_at"]).total_seconds() >= 45.0
    assert await dispatcher.deliver_due() == []
    assert route.call_count == 1

    await make_due(engine)
    (second,) = await dispatcher.deliver_due()

    assert (second.status, second.status_code) == ("delivered", 200)
    first_body, second_body = (received(call.request, hook["secret"]) for call in route.calls)
    assert first_body == second_body  # the same event, the same bytes
    (row,) = await delivery_rows(engine, hook["id"])
    assert (row["status"], row["attempts"], row["last_status_code"], row["last_error"]) == (
        "delivered",
        2,
        200,
        None,
    )


def test_retry_delays_double_up_to_the_cap_within_their_upper_half(engine):
    low = WebhookDispatcher(engine, SETTINGS, "t", jitter=lambda: 0.0)
    high = WebhookDispatcher(engine, SETTINGS, "t", jitter=lambda: 1.0)
    # Base 60 s, cap 600 s.
    assert [low.retry_delay_s(n) for n in range(1, 7)] == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0]
    assert [high.retry_delay_s(n) for n in range(1, 7)] == [60.0, 120.0, 240.0, 480.0, 600.0, 600.0]


async def test_delivery_gives_up_after_the_last_attempt(client, org, engine, dispatcher, respx_mock):
    hook = await register(client, org.headers)
    await _ping(client, org, hook)
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(503))
    statuses = []
    for _ in range(SETTINGS.max_attempts):
        (outcome,) = await dispatcher.deliver_due()
        statuses.append(outcome.status)
        await make_due(engine)
    assert statuses == ["pending", "pending", "failed"]
    assert await dispatcher.deliver_due() == []
    assert route.call_count == 3
    (row,) = await delivery_rows(engine, hook["id"])
    assert (row["status"], row["attempts"], row["last_status_code"], row["last_error"]) == (
        "failed",
        3,
        503,
        "the endpoint answered HTTP 503; gave up after 3 attempts",
    )
    assert row["finished_at"] is not None


async def test_redeliver_sends_the_same_event_again(client, org, engine, dispatcher, respx_mock):
    hook = await register(client, org.headers)
    await _ping(client, org, hook)
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(410))
    for _ in range(SETTINGS.max_attempts):
        await dispatcher.deliver_due()
        await make_due(engine)
    (failed,) = await delivery_rows(engine, hook["id"])
    assert failed["status"] == "failed"

    r = await client.post(
        f"/api/webhooks/{hook['id']}/deliveries/{failed['id']}/redeliver", headers=org.headers
    )
    assert r.status_code == 202, r.text
    again = r.json()
    assert (again["event_id"], again["event_type"], again["status"], again["attempts"]) == (
        str(failed["event_id"]),
        "ping",
        "pending",
        0,
    )
    assert again["id"] != str(failed["id"])
    route.mock(return_value=httpx.Response(200))
    (outcome,) = await dispatcher.deliver_due()
    assert (outcome.delivery_id, outcome.status) == (uuid.UUID(again["id"]), "delivered")
    first, last = route.calls[0].request, route.calls.last.request
    assert received(last, hook["secret"]) == received(first, hook["secret"])
    assert last.headers["vk-event-id"] == str(failed["event_id"])
    log = (await client.get(f"/api/webhooks/{hook['id']}/deliveries", headers=org.headers)).json()
    assert [(d["id"], d["status"]) for d in log["items"]] == [
        (again["id"], "delivered"),
        (str(failed["id"]), "failed"),
    ]


async def test_a_disabled_webhook_gets_nothing(client, org, engine, drain_queue, dispatcher, respx_mock):
    hook = await register(client, org.headers)
    queued = await _ping(client, org, hook)
    abandoned = await _ping(client, org, hook)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE webhook_deliveries SET status = 'delivering', attempts = 1, lease_owner = 'gone/1',"
                " lease_expires_at = now() - interval '1 second' WHERE id = :i"
            ),
            {"i": abandoned["id"]},
        )
    route = respx_mock.route()

    r = await client.patch(f"/api/webhooks/{hook['id']}", json={"active": False}, headers=org.headers)
    assert r.status_code == 200
    kb = await create_kb(client, org.headers)
    await create_text_doc(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 1}

    assert await dispatcher.deliver_due() == []
    assert not route.called
    # What was waiting says why it was not sent; the document's events were never queued.
    reason = "the webhook was disabled before this delivery was made"
    rows = await delivery_rows(engine, hook["id"])
    assert [(str(r["id"]), r["status"], r["attempts"], r["last_error"], r["lease_owner"]) for r in rows] == [
        (queued["id"], "failed", 0, reason, None),
        (abandoned["id"], "failed", 1, reason, None),
    ]
    assert [e["type"] for e in await _events(engine, org.id)] == ["ping", "ping"]


async def test_a_host_that_now_resolves_privately_is_not_sent_to(
    client, org, engine, dispatcher, respx_mock, resolver
):
    hook = await register(client, org.headers)
    await _ping(client, org, hook)
    route = respx_mock.route()
    resolver.answers = ["93.184.216.34", "10.1.2.3"]  # DNS rebinding: one private answer blocks the host

    (outcome,) = await dispatcher.deliver_due()

    error = (
        "the URL cannot be used for a webhook: the host hooks.example.com resolves to 10.1.2.3, "
        "which is not allowed (private network; INGESTION__ALLOWED_HOSTS can allow this host)"
    )
    assert (outcome.status, outcome.error) == ("failed", error)
    assert not route.called
    (row,) = await delivery_rows(engine, hook["id"])
    assert (row["status"], row["attempts"], row["last_status_code"], row["last_error"]) == (
        "failed",
        1,
        None,
        error,
    )


async def test_an_organisation_with_attempts_in_flight_yields_the_next_slot(
    client, org, other_org, engine, dispatcher, respx_mock
):
    # Org A's endpoint never answers: three attempts hold slots, a fourth is due first.
    hook_a = await register(client, org.headers)
    pings_a = [await _ping(client, org, hook_a) for _ in range(4)]
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE webhook_deliveries SET status = 'delivering', attempts = 1, "
                "lease_expires_at = now() + interval '1 minute' WHERE id = ANY(:ids)"
            ),
            {"ids": [uuid.UUID(p["id"]) for p in pings_a[:3]]},
        )
    hook_b = await register(client, other_org.headers)
    ping_b = await _ping(client, other_org, hook_b)
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(200))

    first, second = await dispatcher.deliver_due(1), await dispatcher.deliver_due(1)

    # By due time alone, A's fourth went first, and with every slot A's, B waited minutes.
    assert [o.delivery_id for o in first + second] == [uuid.UUID(ping_b["id"]), uuid.UUID(pings_a[3]["id"])]
    assert route.call_count == 2


async def test_a_claim_takes_the_earliest_due_across_endpoints(client, org, engine, dispatcher, respx_mock):
    # Each endpoint offers only its earliest due deliveries; across them, due time decides.
    one, two = await register(client, org.headers), await register(client, org.headers)
    pings = [await _ping(client, org, hook) for hook in (one, two, one, two, one)]
    waited = {p["id"]: 50 - 10 * i for i, p in enumerate(pings)}  # seconds overdue: 50, 40, ... 10
    waited[pings[3]["id"]] = -3600  # due in an hour
    async with engine.begin() as conn:
        for delivery, seconds in waited.items():
            await conn.execute(
                text(
                    "UPDATE webhook_deliveries SET next_attempt_at = now() - make_interval(secs => :s) "
                    "WHERE id = :id"
                ),
                {"s": seconds, "id": uuid.UUID(delivery)},
            )
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(200))

    first, second = await dispatcher.deliver_due(3), await dispatcher.deliver_due(3)

    ids = [uuid.UUID(p["id"]) for p in pings]
    assert sorted(o.delivery_id for o in first) == sorted(ids[:3])
    assert [o.delivery_id for o in second] == [ids[4]]
    assert route.call_count == 4


async def test_a_stored_url_no_request_can_be_made_of_fails_at_once(
    client, org, engine, dispatcher, respx_mock
):
    # Stored before control characters were refused: the checks' parser dropped the tab.
    hook = await register(client, org.headers)
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE webhook_endpoints SET url = :u WHERE id = :id"),
            {"u": RECEIVER_URL + "/o\tk", "id": hook["id"]},
        )
    await _ping(client, org, hook)
    route = respx_mock.route()

    (outcome,) = await dispatcher.deliver_due()

    assert (outcome.status, outcome.error) == (
        "failed",
        "the URL cannot be used for a webhook: no request can be made of it "
        f"(Invalid non-printable ASCII character in URL, '\\t' at position {len(RECEIVER_URL) + 2}.)",
    )
    assert not route.called


async def test_an_operator_allowed_intranet_host_is_delivered_to(client, org, engine, respx_mock, resolver):
    hook = await register(client, org.headers)
    await _ping(client, org, hook)
    resolver.answers = ["10.1.2.3"]
    dispatcher = WebhookDispatcher(
        engine, SETTINGS, "t", resolver=resolver, intranet=IntranetAccess.parse(hosts=["hooks.example.com"])
    )
    route = respx_mock.post("https://10.1.2.3/vk").mock(return_value=httpx.Response(200))
    try:
        assert [o.status for o in await dispatcher.deliver_due()] == ["delivered"]
    finally:
        await dispatcher.aclose()
    assert route.calls.last.request.headers["host"] == "hooks.example.com"


async def test_an_attempt_whose_worker_vanished_is_made_again(client, org, engine, dispatcher, respx_mock):
    hook = await register(client, org.headers)
    queued = await _ping(client, org, hook)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE webhook_deliveries SET status = 'delivering', attempts = 1, lease_owner = 'gone/1',"
                " lease_expires_at = now() - interval '1 second' WHERE id = :i"
            ),
            {"i": queued["id"]},
        )
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(200))
    (outcome,) = await dispatcher.deliver_due()
    assert outcome.status == "delivered"
    assert route.call_count == 1
    (row,) = await delivery_rows(engine, hook["id"])
    assert (row["status"], row["attempts"], row["lease_owner"]) == ("delivered", 2, None)


async def test_old_events_are_pruned_with_their_log_unless_still_due(client, org, engine, dispatcher):
    hook = await register(client, org.headers)
    done = await _ping(client, org, hook)
    waiting = await _ping(client, org, hook)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE webhook_events SET created_at = now() - interval '31 days'"))
        await conn.execute(
            text(
                "UPDATE webhook_deliveries SET status = 'delivered', next_attempt_at = now() + interval '1 day'"
                " WHERE id = :i"
            ),
            {"i": done["id"]},
        )
        await conn.execute(
            text("UPDATE webhook_deliveries SET next_attempt_at = now() + interval '1 day' WHERE id = :i"),
            {"i": waiting["id"]},
        )
    assert await dispatcher.prune() == "DELETE 1"
    assert [str(r["id"]) for r in await delivery_rows(engine, hook["id"])] == [waiting["id"]]


async def test_the_running_dispatcher_wakes_when_an_event_is_queued(
    client, org, engine, respx_mock, resolver
):
    hook = await register(client, org.headers)
    delivered = asyncio.Event()

    def answer(request):
        delivered.set()
        return httpx.Response(200)

    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(side_effect=answer)
    # An hour between polls: only the notification can wake it within the test.
    settings = SETTINGS.model_copy(update={"poll_interval_s": 3600.0, "concurrency": 2})
    dispatcher = WebhookDispatcher(engine, settings, "test-running", resolver=resolver)
    await dispatcher.start()
    try:
        await asyncio.sleep(0.2)  # both loops found nothing and sleep
        await _enqueue(engine, org.id, "crawl.completed", {"crawl_id": "c1"})
        await asyncio.wait_for(delivered.wait(), timeout=30)
    finally:
        await asyncio.wait_for(dispatcher.stop(grace_s=30), timeout=60)
    body = received(route.calls.last.request, hook["secret"])
    assert (body["type"], body["data"]) == ("crawl.completed", {"crawl_id": "c1"})


def _documented_verify():
    """The verification snippet of docs/WEBHOOKS.md, run as a receiver would copy it."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "WEBHOOKS.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    namespace: dict[str, object] = {}
    exec(snippet, namespace)
    return namespace["verify"]


async def test_the_documented_verification_accepts_a_delivery_and_nothing_else(
    client, org, dispatcher, respx_mock
):
    verify = _documented_verify()
    hook = await register(client, org.headers)
    await _ping(client, org, hook)
    route = respx_mock.post(RECEIVER_ADDRESS_URL).mock(return_value=httpx.Response(200))
    await dispatcher.deliver_due()
    request = route.calls.last.request
    timestamp, signature = request.headers["vk-timestamp"], request.headers["vk-signature"]

    assert verify(hook["secret"], timestamp, signature, request.content) is True
    assert verify(hook["secret"], timestamp, signature, request.content.replace(b"ping", b"pong")) is False
    assert verify("whsec_another", timestamp, signature, request.content) is False
    stale = str(int(timestamp) - 301)
    resigned = (
        "v1="
        + hmac.new(
            hook["secret"].encode(), f"{stale}.".encode() + request.content, hashlib.sha256
        ).hexdigest()
    )
    assert verify(hook["secret"], stale, resigned, request.content) is False


async def test_the_service_with_inline_workers_delivers_a_processed_documents_events(
    database_url, settings, org, respx_mock
):
    """INGESTION__ISOLATION=inline: the service's own lifespan runs the dispatcher beside the
    ingestion workers, with the same address checks (the app's resolver)."""
    app = create_app(settings, database_url=database_url, resolver=fake_resolver, run_workers=True)
    bodies: list[dict] = []
    all_three = asyncio.Event()  # pending, processing, ready
    secret: list[str] = []

    def answer(request):
        bodies.append(received(request, secret[0]))
        if len(bodies) == 3:
            all_three.set()
        return httpx.Response(200)

    respx_mock.post(RECEIVER_ADDRESS_URL).mock(side_effect=answer)
    async with served(app) as http:
        r = await http.post(
            "/api/webhooks",
            json={"url": RECEIVER_URL, "events": ["document.status_changed"]},
            headers=org.headers,
        )
        assert r.status_code == 201, r.text
        secret.append(r.json()["secret"])
        kb = await create_kb(http, org.headers)
        doc = await create_text_doc(http, org.headers, kb["id"])
        await asyncio.wait_for(all_three.wait(), timeout=60)
    assert sorted(b["data"]["status"] for b in bodies) == ["pending", "processing", "ready"]
    assert {b["data"]["document_id"] for b in bodies} == {doc["id"]}
