"""Query log and knowledge gap pages: per agent, filtered by status and time, paginated with
the filters kept; a call's page with its candidates, scores, timings and answer; questions
shown as text; another organisation's agent or call is 404."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from tests.conftest import Org, make_org
from tests.console.helpers import text_of
from tests.helpers import assign_new_agent, create_kb, create_text_doc
from tests.query.conftest import FAQ

Client = AsyncTestClient[Litestar]
Browser = tuple[Client, str]


@pytest.fixture
async def agent(client: Client, org: Org, drain_queue: Any) -> str:
    kb = await create_kb(client, org.headers, "Dental FAQ")
    await create_text_doc(
        client, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 1}
    return agent


async def ask(client: Client, org: Org, agent: str, question: str, **headers: str) -> dict[str, Any]:
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers={**org.headers, **headers}
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def question_links(page: str) -> list[str]:
    return list(re.findall(r'<a href="/console/query-log/[0-9a-f-]{36}">([^<]*)</a>', page))


async def test_calls_newest_first_filtered_by_status(
    signed_in: Browser, client: Client, org: Org, agent: str
) -> None:
    browser, _ = signed_in
    await ask(client, org, agent, "Where can I park?")
    await ask(client, org, agent, "Who painted the Mona Lisa?")
    await ask(client, org, agent, "When are you open on Saturdays?")
    first = await browser.get("/console/query-log")
    assert first.status_code == 200
    assert "Choose an agent to see its calls." in text_of(first.text)
    assert f'<option value="{agent}">{agent} (Dental FAQ)</option>' in first.text
    page = await browser.get("/console/query-log", params={"agent_id": agent})
    assert question_links(page.text) == [
        "When are you open on Saturdays?",
        "Who painted the Mona Lisa?",
        "Where can I park?",
    ]
    found = await browser.get("/console/query-log", params={"agent_id": agent, "status": "not_found"})
    assert question_links(found.text) == ["Who painted the Mona Lisa?"]
    assert '<option value="not_found" selected>' in found.text


async def test_time_range(signed_in: Browser, client: Client, org: Org, agent: str, engine: Any) -> None:
    browser, _ = signed_in
    await ask(client, org, agent, "Where can I park?")
    await ask(client, org, agent, "When are you open on Saturdays?")
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE query_log SET created_at = '2026-01-10T12:00:00Z' WHERE query = 'Where can I park?'")
        )
    params = {"agent_id": agent, "since": "2026-01-10T11:00", "until": "2026-01-10T13:00"}
    r = await browser.get("/console/query-log", params=params)
    assert question_links(r.text) == ["Where can I park?"]
    r = await browser.get("/console/query-log", params={"agent_id": agent, "since": "2026-01-10T13:00"})
    assert question_links(r.text) == ["When are you open on Saturdays?"]
    # With a zone of its own, the time is taken as given.
    r = await browser.get(
        "/console/query-log", params={"agent_id": agent, "until": "2026-01-10T13:30:00+02:00"}
    )
    assert question_links(r.text) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-01-10T13:00", "until": "2026-01-10T12:00"}, "until"),
        ({"status": "lost"}, "status"),
        ({"calls": "robots"}, "calls"),
    ],
    ids=["bad-time", "until-before-since", "bad-status", "bad-calls"],
)
async def test_bad_filters_say_what_is_wrong(
    signed_in: Browser, agent: str, params: dict[str, str], field: str
) -> None:
    browser, _ = signed_in
    r = await browser.get("/console/query-log", params={"agent_id": agent, **params})
    assert r.status_code == 422
    assert f'id="error-{field}"' in r.text


async def test_a_time_past_the_year_9999_in_utc_is_refused(signed_in: Browser, agent: str) -> None:
    # Valid ISO 8601 that overflowed when the driver turned it into UTC: a 500.
    browser, _ = signed_in
    r = await browser.get("/console/query-log", params={"agent_id": agent, "until": "0001-01-01T00:00+14:00"})
    assert r.status_code == 422
    assert 'id="error-until"' in r.text
    assert "Enter a date between the years 1 and 9999." in r.text


async def test_pages_keep_the_filters(signed_in: Browser, org: Org, agent: str, engine: Any) -> None:
    browser, _ = signed_in
    async with engine.begin() as conn:
        for i in range(55):
            await conn.execute(
                text(
                    "INSERT INTO query_log (id, org_id, agent_id, query, normalized_query, status, confidence,"
                    " answer, created_at) VALUES (:id, :org, :agent, :q, :q, :status, 0.5, 'a',"
                    " now() - make_interval(secs => :age))"
                ),
                {
                    "id": uuid.uuid4(),
                    "org": org.id,
                    "agent": uuid.UUID(agent),
                    "q": f"question {i}",
                    "status": "not_found" if i % 2 else "answered",
                    "age": i,
                },
            )
    first = await browser.get("/console/query-log", params={"agent_id": agent, "status": "answered"})
    links = question_links(first.text)
    assert (len(links), links[0], links[-1]) == (28, "question 0", "question 54")  # 28 answered of 55
    everything = await browser.get("/console/query-log", params={"agent_id": agent})
    assert len(question_links(everything.text)) == 50
    assert "1–50 of 55" in text_of(everything.text)
    following = re.search(r'<a href="([^"]+)" rel="next">', everything.text)
    assert following
    assert following.group(1) == f"/console/query-log?agent_id={agent}&amp;page=2"
    second = await browser.get(f"/console/query-log?agent_id={agent}&page=2")
    assert question_links(second.text) == [f"question {i}" for i in range(50, 55)]
    assert 'rel="prev"' in second.text


async def test_a_call_shows_candidates_scores_timings_and_answer(
    signed_in: Browser, client: Client, org: Org, agent: str
) -> None:
    browser, _ = signed_in
    reply = await ask(client, org, agent, "Where can I park?")
    page = await browser.get(f"/console/query-log/{reply['query_id']}")
    assert page.status_code == 200
    shown = text_of(page.text)
    assert reply["answer"] in shown
    assert "Where can I park?" in shown
    logged = (await client.get(f"/api/agents/{agent}/queries", headers=org.headers)).json()["items"][0]
    rows = re.findall(r"<tr>\s*<td class=\"num\">(\d+)</td>\s*<td class=\"num\">([^<]+)</td>", page.text)
    assert [float(score) for _, score in rows] == [c["score"] for c in logged["chunks"]]
    assert "Practice FAQ" in shown
    assert "Free parking is available behind the building" in shown
    for name in logged["timings"]:
        assert f'<th scope="col" class="num">{name}</th>' in page.text


async def test_questions_are_shown_as_text(signed_in: Browser, client: Client, org: Org, agent: str) -> None:
    browser, _ = signed_in
    evil = "<script>alert('x')</script> where do I park?"
    reply = await ask(client, org, agent, evil)
    for path in (f"/console/query-log?agent_id={agent}", f"/console/query-log/{reply['query_id']}"):
        page = await browser.get(path)
        assert "<script>alert" not in page.text
        assert "&lt;script&gt;alert(" in page.text


async def test_knowledge_gaps_leave_out_evaluation_calls(
    signed_in: Browser, client: Client, org: Org, agent: str
) -> None:
    browser, _ = signed_in
    await ask(client, org, agent, "Who painted the Mona Lisa?")
    await ask(client, org, agent, "Who painted the Mona Lisa")
    await ask(client, org, agent, "Do you sell bicycles?", **{"X-Evaluation": "true"})
    await ask(client, org, agent, "Where can I park?")
    page = await browser.get("/console/query-log/gaps", params={"agent_id": agent})
    assert page.status_code == 200
    rows = re.findall(r'<td class="title-cell">([^<]+)</td>\s*<td class="num">(\d+)</td>', page.text)
    # One row for both spellings (the API's gaps group them), shown as min(query) spells it.
    assert rows == [("Who painted the Mona Lisa", "2")]
    everywhere = await browser.get("/console/query-log/gaps")
    assert re.findall(r'<td class="title-cell">([^<]+)</td>', everywhere.text) == [
        "Who painted the Mona Lisa"
    ]


async def test_another_organisations_agent_and_call_are_not_found(
    signed_in: Browser, client: Client, org: Org, sessionmaker: Any, drain_queue: Any
) -> None:
    browser, _ = signed_in
    other = await make_org(sessionmaker, "Other")
    kb = await create_kb(client, other.headers, "Theirs")
    await create_text_doc(client, other.headers, kb["id"], content=FAQ, content_type="markdown")
    theirs = await assign_new_agent(client, other.headers, kb["id"])
    await drain_queue()
    reply = await ask(client, other, theirs, "Where can I park?")
    assert (await browser.get("/console/query-log", params={"agent_id": theirs})).status_code == 404
    assert (await browser.get("/console/query-log/gaps", params={"agent_id": theirs})).status_code == 404
    detail = await browser.get(f"/console/query-log/{reply['query_id']}")
    assert detail.status_code == 404
    assert "Where can I park?" not in detail.text
    assert (await browser.get(f"/console/query-log/{uuid.uuid4()}")).status_code == 404
