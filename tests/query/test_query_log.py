"""What admins read from the query log (app/query/query_log.py): an agent's calls with their
filters and paging, and the knowledge gaps (questions that ended not_found, or answered with
a confidence under min_confidence + 0.15), grouped by normalised question.

Calls are made through the API; their log rows are then dated explicitly, so the time
filters are checked at their exact boundaries."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.ingestion.worker import drain
from app.main import create_app
from tests.conftest import fake_resolver, make_ingestor
from tests.helpers import bearer, create_kb, create_key, create_text_doc
from tests.query.conftest import FAQ

# The offline answerer's confidences for the FAQ: "When do you open on Saturdays?"-style
# questions answer at about 0.74, "Where can I park?" at 1.0. With min_confidence 0.7 the
# gap threshold is 0.85, so the first is a low-confidence answer and the second is not.
MIN_CONFIDENCE = 0.7
LOW = MIN_CONFIDENCE + 0.15


def real(value: float) -> Any:
    """The log keeps a confidence as a float4 (real): equal to about seven digits."""
    return pytest.approx(value, rel=1e-6)


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 1, 1, hour, minute, tzinfo=UTC)


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


@pytest.fixture
async def client(database_url, settings) -> AsyncIterator[tuple[AsyncTestClient[Any], Any]]:
    strict = settings.model_copy(
        update={"query": settings.query.model_copy(update={"min_confidence": MIN_CONFIDENCE})}
    )
    app = create_app(strict, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=app) as c:
        yield c, app


async def assigned_agent(c, org, app, engine, title: str, doc_title: str, content: str) -> str:
    kb = await create_kb(c, org.headers, title)
    await create_text_doc(c, org.headers, kb["id"], title=doc_title, content=content, content_type="markdown")
    agent = str(uuid.uuid4())
    r = await c.put(f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers)
    assert r.status_code == 200, r.text
    assert await drain(make_ingestor(app, engine)) == {"ready": 1}
    return agent


async def ask(c, org, agent: str, question: str) -> dict[str, Any]:
    r = await c.post(f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def date_call(engine, query_id: str, when: datetime) -> None:
    async with engine.begin() as conn:
        result = await conn.execute(
            text("UPDATE query_log SET created_at = :t WHERE id = :id"), {"t": when, "id": query_id}
        )
    assert result.rowcount == 1


async def test_queries_filter_by_status_and_time_and_page(client, org, engine):
    c, app = client
    agent = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    calls = [
        ("Where can I park?", "answered", at(10)),
        ("Do you offer teeth whitening with lasers?", "not_found", at(11)),
        ("When is payment due?", "answered", at(12)),
    ]
    ids = []
    for question, status, when in calls:
        body = await ask(c, org, agent, question)
        assert body["status"] == status
        await date_call(engine, body["query_id"], when)
        ids.append(body["query_id"])
    park, whitening, payment = ids

    async def page(**params: Any) -> tuple[list[str], int, int, int]:
        r = await c.get(f"/api/agents/{agent}/queries", params=params, headers=org.headers)
        assert r.status_code == 200, r.text
        body = r.json()
        return [q["id"] for q in body["items"]], body["total"], body["limit"], body["offset"]

    assert await page() == ([payment, whitening, park], 3, 50, 0)  # newest first
    assert await page(status="answered") == ([payment, park], 2, 50, 0)
    assert await page(status="not_found") == ([whitening], 1, 50, 0)
    assert await page(status="unavailable") == ([], 0, 50, 0)
    # since is inclusive, until exclusive.
    assert await page(since=iso(at(11))) == ([payment, whitening], 2, 50, 0)
    assert await page(until=iso(at(12))) == ([whitening, park], 2, 50, 0)
    assert await page(since=iso(at(11)), until=iso(at(12))) == ([whitening], 1, 50, 0)
    assert await page(since=iso(at(12, 1))) == ([], 0, 50, 0)
    # The total counts every match, not the page.
    assert await page(limit=1) == ([payment], 3, 1, 0)
    assert await page(limit=1, offset=1) == ([whitening], 3, 1, 1)
    assert await page(limit=2, offset=2) == ([park], 3, 2, 2)
    assert await page(status="answered", limit=1, offset=1) == ([park], 2, 1, 1)


async def test_knowledge_gaps_group_filter_and_include_low_confidence_answers(client, org, engine):
    c, app = client
    faq_agent = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    team_agent = await assigned_agent(
        c, org, app, engine, "Team", "Our team", "# Team\nDoctor Smith has treated patients here since 2005."
    )
    calls = [
        (faq_agent, "Do you offer teeth whitening with lasers?", "not_found", at(10)),
        (team_agent, "Do you offer teeth whitening with lasers", "not_found", at(11)),
        (faq_agent, "What about saturdays?", "answered", at(12)),  # low confidence
        (team_agent, "What about saturdays", "not_found", at(8)),
        (faq_agent, "Where can I park?", "answered", at(12, 30)),  # confident: no gap
        (team_agent, "Who won the football world cup in 1998?", "not_found", at(9)),
    ]
    confidence = {}
    for agent, question, status, when in calls:
        body = await ask(c, org, agent, question)
        assert body["status"] == status, question
        await date_call(engine, body["query_id"], when)
        confidence[(agent, question)] = body["confidence"]
    low = confidence[(faq_agent, "What about saturdays?")]
    assert MIN_CONFIDENCE <= low < LOW
    assert confidence[(faq_agent, "Where can I park?")] >= LOW

    async def gaps(**params: Any) -> list[dict[str, Any]]:
        r = await c.get("/api/knowledge-gaps", params=params, headers=org.headers)
        assert r.status_code == 200, r.text
        found: list[dict[str, Any]] = r.json()
        for gap in found:
            gap["last_asked"] = datetime.fromisoformat(gap["last_asked"])
        return found

    whitening = (faq_agent, "Do you offer teeth whitening with lasers?")
    whitening_team = (team_agent, "Do you offer teeth whitening with lasers")
    saturdays_team = (team_agent, "What about saturdays")
    cup = (team_agent, "Who won the football world cup in 1998?")
    # Most asked first; equal counts, the most recently asked first. A group is named by
    # its first spelling in sort order (here the one without a question mark).
    assert await gaps() == [
        {
            "question": "What about saturdays",
            "count": 2,
            "last_asked": at(12),
            "agent_ids": sorted([faq_agent, team_agent]),
            "statuses": ["answered", "not_found"],
            "max_confidence": real(max(low, confidence[saturdays_team])),
        },
        {
            "question": "Do you offer teeth whitening with lasers",
            "count": 2,
            "last_asked": at(11),
            "agent_ids": sorted([faq_agent, team_agent]),
            "statuses": ["not_found"],
            "max_confidence": real(max(confidence[whitening], confidence[whitening_team])),
        },
        {
            "question": "Who won the football world cup in 1998?",
            "count": 1,
            "last_asked": at(9),
            "agent_ids": [team_agent],
            "statuses": ["not_found"],
            "max_confidence": real(confidence[cup]),
        },
    ]
    # One agent's calls only.
    team_gaps = await gaps(agent_id=team_agent)
    assert [
        (g["question"], g["count"], g["last_asked"], g["agent_ids"], g["statuses"]) for g in team_gaps
    ] == [
        ("Do you offer teeth whitening with lasers", 1, at(11), [team_agent], ["not_found"]),
        ("Who won the football world cup in 1998?", 1, at(9), [team_agent], ["not_found"]),
        ("What about saturdays", 1, at(8), [team_agent], ["not_found"]),
    ]
    assert [(g["question"], g["count"], g["statuses"]) for g in await gaps(agent_id=faq_agent)] == [
        ("What about saturdays?", 1, ["answered"]),
        ("Do you offer teeth whitening with lasers?", 1, ["not_found"]),
    ]
    # Calls since a time (inclusive): the 10:00 whitening call still counts.
    assert [(g["question"], g["count"], g["last_asked"]) for g in await gaps(since=iso(at(10)))] == [
        ("Do you offer teeth whitening with lasers", 2, at(11)),
        ("What about saturdays?", 1, at(12)),
    ]
    assert [g["question"] for g in await gaps(limit=1)] == ["What about saturdays"]
    # Pages follow the same order, without repeats or holes.
    assert [g["question"] for g in await gaps(limit=1, offset=1)] == [
        "Do you offer teeth whitening with lasers"
    ]
    assert [g["question"] for g in await gaps(limit=2, offset=2)] == [
        "Who won the football world cup in 1998?"
    ]
    # Calls before a time (exclusive): the 11:00 whitening call and the 12:00 ones are out.
    assert [(g["question"], g["count"], g["last_asked"]) for g in await gaps(until=iso(at(11)))] == [
        ("Do you offer teeth whitening with lasers?", 1, at(10)),
        ("Who won the football world cup in 1998?", 1, at(9)),
        ("What about saturdays", 1, at(8)),
    ]


async def test_an_agent_unknown_here_is_404_for_its_queries_and_gaps(client, org, other_org, engine):
    # The README promises 404 for every route under /api/agents/{agent_id}, and the gaps'
    # agent filter names an agent the same way: an empty list would hide a mistyped id.
    c, app = client
    known = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    foreign_kb = await create_kb(c, other_org.headers, "Their FAQ")
    foreign = str(uuid.uuid4())
    r = await c.put(
        f"/api/knowledge/{foreign_kb['id']}/agents", json={"agent_ids": [foreign]}, headers=other_org.headers
    )
    assert r.status_code == 200, r.text
    not_found = {
        "error": "not_found",
        "detail": "agent not found: no knowledge base of this organisation is assigned to it",
    }
    for agent in (str(uuid.uuid4()), foreign):
        for path, params in (
            (f"/api/agents/{agent}/queries", {}),
            ("/api/knowledge-gaps", {"agent_id": agent}),
        ):
            r = await c.get(path, params=params, headers=org.headers)
            assert (path, r.status_code, r.json()) == (path, 404, not_found)
    # The same routes for the organisation's own agent, which has no calls yet.
    r = await c.get(f"/api/agents/{known}/queries", headers=org.headers)
    assert (r.status_code, r.json()) == (200, {"items": [], "total": 0, "limit": 50, "offset": 0})
    r = await c.get("/api/knowledge-gaps", params={"agent_id": known}, headers=org.headers)
    assert (r.status_code, r.json()) == (200, [])


async def test_a_query_key_reads_no_insights_and_changes_no_settings(client, org, engine):
    c, app = client
    agent = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    assert (await ask(c, org, agent, "Who won the football world cup in 1998?"))["status"] == "not_found"
    key = bearer((await create_key(c, org.headers, "query"))["key"])
    calls = [
        ("GET", f"/api/agents/{agent}/queries", None),
        ("GET", "/api/knowledge-gaps", None),
        ("PUT", f"/api/agents/{agent}/settings", {"prompt_variant": "concise"}),
    ]
    for method, path, payload in calls:
        denied = await c.request(method, path, json=payload, headers=key)
        assert denied.status_code == 403, (path, denied.text)
        assert denied.json()["error"] == "forbidden"
    settings = (await c.get(f"/api/agents/{agent}/settings", headers=org.headers)).json()
    assert settings["prompt_variant"] is None  # the refused PUT changed nothing
    # The same calls with the admin key succeed (so the 403s are the role's).
    for method, path, payload in calls:
        allowed = await c.request(method, path, json=payload, headers=org.headers)
        assert allowed.status_code == 200, (path, allowed.text)


async def test_time_bounds_must_be_rfc3339_with_a_zone(client, org, engine):
    # "until=0.5" was read as half a second after 1970, and a time without a zone as UTC.
    c, app = client
    agent = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    expected = "expected an RFC 3339 date-time with its zone, e.g. 2026-11-25T09:00:00Z"
    refused = [
        ("until", "0.5", expected),
        ("since", "1700000000", expected),
        ("until", "2026-01-01T10:00:00", expected),
        ("since", "2026-01-01", expected),
        ("until", "2026-13-01T10:00:00Z", expected),
        # An unencoded '+' arrives as a space.
        ("since", "2026-01-01T10:00:00 02:00", f"{expected} (a '+' in a query string must be sent as %2B)"),
    ]
    for path in (f"/api/agents/{agent}/queries", "/api/knowledge-gaps"):
        for name, value, message in refused:
            r = await c.get(path, params={name: value}, headers=org.headers)
            assert (path, value, r.status_code, r.json()) == (
                path,
                value,
                400,
                {
                    "error": "bad_request",
                    "detail": f"invalid parameters: {name}",
                    "fields": [{"field": name, "message": message}],
                },
            )
        for value in ("2026-01-01T10:00:00Z", "2026-01-01t10:00:00.250z", "2026-01-01T10:00:00+02:00"):
            r = await c.get(path, params={"since": value, "until": value}, headers=org.headers)
            assert (path, value, r.status_code) == (path, value, 200)


async def test_time_bounds_past_the_year_9999_in_utc_are_a_400(client, org, engine):
    # Valid RFC 3339 that overflowed when the driver turned it into UTC: a 500.
    c, app = client
    agent = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    message = "expected a date-time between the years 1 and 9999, once in UTC"
    for path in (f"/api/agents/{agent}/queries", "/api/knowledge-gaps"):
        for name, value in (("since", "9999-12-31T23:59:59-12:00"), ("until", "0001-01-01T00:00:00+14:00")):
            r = await c.get(path, params={name: value}, headers=org.headers)
            assert (path, r.status_code, r.json()) == (
                path,
                400,
                {
                    "error": "bad_request",
                    "detail": f"invalid parameters: {name}",
                    "fields": [{"field": name, "message": message}],
                },
            )


async def test_an_unknown_status_filter_names_the_statuses(client, org, engine):
    c, app = client
    agent = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    r = await c.get(f"/api/agents/{agent}/queries", params={"status": "failed"}, headers=org.headers)
    assert (r.status_code, r.json()["fields"]) == (
        400,
        [
            {
                "field": "status",
                "message": "Invalid enum value 'failed'; expected one of: answered, not_found, unavailable",
            }
        ],
    )


async def test_evaluation_calls_are_labelled_and_left_out_of_the_gaps(client, org, engine):
    # vk eval and vk replay send X-Evaluation: true; their questions are no caller's.
    c, app = client
    agent = await assigned_agent(c, org, app, engine, "Dental FAQ", "Practice FAQ", FAQ)
    question = "Do you offer teeth whitening with lasers?"
    ids = {}
    for label, headers in (
        ("caller", org.headers),
        ("caller, said so", {**org.headers, "X-Evaluation": "false"}),
        ("evaluation", {**org.headers, "X-Evaluation": "true"}),
    ):
        r = await c.post(f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=headers)
        assert (label, r.status_code, r.json()["status"]) == (label, 200, "not_found")
        ids[label] = r.json()["query_id"]
        await date_call(engine, ids[label], at(10 + len(ids)))

    async def logged(**params: Any) -> list[tuple[str, bool]]:
        r = await c.get(f"/api/agents/{agent}/queries", params=params, headers=org.headers)
        assert r.status_code == 200, r.text
        return [(q["id"], q["evaluation"]) for q in r.json()["items"]]

    assert await logged() == [
        (ids["evaluation"], True),
        (ids["caller, said so"], False),
        (ids["caller"], False),
    ]
    assert await logged(evaluation="false") == [(ids["caller, said so"], False), (ids["caller"], False)]
    assert await logged(evaluation="true") == [(ids["evaluation"], True)]
    r = await c.get("/api/knowledge-gaps", headers=org.headers)
    assert [(g["question"], g["count"]) for g in r.json()] == [(question, 2)]
    r = await c.post(
        f"/api/agents/{agent}/query_knowledge",
        json={"query": question},
        headers={**org.headers, "X-Evaluation": "maybe"},
    )
    assert (r.status_code, r.json()["fields"]) == (
        400,
        [{"field": "X-Evaluation", "message": "expected true or false"}],
    )
    # The listing's optional filter says it in the same words.
    r = await c.get(f"/api/agents/{agent}/queries", params={"evaluation": "maybe"}, headers=org.headers)
    assert (r.status_code, r.json()["fields"]) == (
        400,
        [{"field": "evaluation", "message": "expected true or false"}],
    )
