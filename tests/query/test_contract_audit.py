"""Issue 19's contract, checked where the other tests of tests/query leave it open: the
streamed form's validation and log row, the semantic answer cache against every change that
must end a reuse (a document's new content, its window ending, other filters, the agent's
attribution and topics), the sources' scores as Source.score documents them, `say_unavailable`
under a transferring policy, and the tool declaration of an agent with fixed filters."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.config import Settings
from app.ingestion.worker import drain
from app.main import create_app
from app.query.service import SOURCE_SCORE_FLOOR
from tests.conftest import fake_resolver, make_ingestor
from tests.console.helpers import sign_in
from tests.helpers import assign_new_agent, create_kb, create_text_doc
from tests.query.conftest import FAQ

HISTORY = [
    {"role": "user", "content": "Is there parking?"},
    {"role": "assistant", "content": "Yes, behind the building."},
]
NOT_FOUND = "I'm sorry, I don't have that information."

FEES = """# Sunrise Dental fees

## Cleanings
A cleaning for an adult costs $120. A cleaning for a child costs $80.

## Fillings
A filling costs $150 per tooth.

## Opening hours
We are open Monday to Friday from 8 am to 6 pm.
"""


def parse_events(body: str) -> list[tuple[str, Any]]:
    events = []
    for block in body.split("\r\n\r\n"):
        if block.strip():
            fields = dict(line.split(": ", 1) for line in block.split("\r\n"))
            events.append((fields["event"], json.loads(fields["data"])))
    return events


async def log_rows(engine: Any, agent: str) -> list[Any]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT query, standalone_question, standalone_method, filters, action, transfer_reason,"
                " semantic_question FROM query_log WHERE agent_id = :a ORDER BY created_at"
            ),
            {"a": agent},
        )
        return list(rows)


async def post(client: Any, headers: dict[str, str], agent: str, body: dict[str, Any], **params: str) -> Any:
    return await client.post(
        f"/api/agents/{agent}/query_knowledge", json=body, headers=headers, params=params
    )


async def ask(client: Any, headers: dict[str, str], agent: str, body: dict[str, Any], **params: str) -> Any:
    r = await post(client, headers, agent, body, **params)
    assert r.status_code == 200, r.text
    return r.json()


# --- validation: the JSON and the streamed form alike -----------------------------------------

REFUSED = [
    pytest.param(
        {"query": "Where is it?", "history": [{"role": "user", "content": f"q{n}"} for n in range(21)]},
        None,
        ["history"],
        id="too-many-turns",
    ),
    pytest.param(
        {"query": "Where is it?", "history": [{"role": "user", "content": "x" * 2001}]},
        None,
        ["history.0.content"],
        id="oversized-turn",
    ),
    pytest.param(
        {"query": "Where can I park?", "filters": {"attributes": {"locale": "en-GB"}}},
        "unknown filter attribute: locale (no document of this agent's knowledge bases has it)",
        ["filters.attributes.locale"],
        id="unknown-filter-key",
    ),
    pytest.param(
        {"query": "Where can I park?", "histroy": HISTORY},
        None,
        ["histroy"],
        id="misspelt-field",
    ),
    pytest.param(
        {"query": "Where can I park?", "filters": {"tags": {"any": [f"t{n}" for n in range(21)]}}},
        None,
        ["filters.tags.any"],
        id="too-many-tags",
    ),
]


@pytest.mark.parametrize("path", ["query_knowledge", "query_knowledge/stream"])
@pytest.mark.parametrize(("body", "detail", "fields"), REFUSED)
async def test_bad_input_is_a_plain_422_naming_the_field_and_nothing_is_logged(
    client, org, faq_agent, engine, path, body, detail, fields
):
    agent = faq_agent["agent"]
    r = await client.post(f"/api/agents/{agent}/{path}", json=body, headers=org.headers)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/json"
    if detail is not None:
        assert r.json()["detail"] == detail
    assert [f["field"] for f in r.json()["fields"]] == fields
    assert await log_rows(engine, agent) == []


async def _tagged_agent(client: Any, org: Any, drain_queue: Any) -> str:
    kb = await create_kb(client, org.headers, "Dental FAQ")
    await create_text_doc(
        client,
        org.headers,
        kb["id"],
        title="Practice FAQ",
        content=FAQ,
        content_type="markdown",
        tags=["practice"],
        attributes={"locale": "en-GB"},
    )
    await create_text_doc(
        client,
        org.headers,
        kb["id"],
        title="US parking",
        content="Parking is in the garage on Main Street, level 2.",
        tags=["practice"],
        attributes={"locale": "en-US"},
    )
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 2}
    return agent


async def test_a_streamed_follow_up_with_filters_is_in_debug_and_the_log(client, org, engine, drain_queue):
    agent = await _tagged_agent(client, org, drain_queue)
    call = {"query": "Where is it?", "history": HISTORY, "filters": {"attributes": {"locale": "en-GB"}}}
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge/stream",
        json=call,
        headers=org.headers,
        params={"debug": "true"},
    )
    assert r.status_code == 200, r.text
    events = parse_events(r.text)
    kind, done = events[-1]
    assert kind == "done"
    assert (done["status"], done["sources"][0]["title"]) == ("answered", "Practice FAQ")
    assert "".join(data["text"] for k, data in events if k == "sentence") == done["answer"]
    assert done["debug"]["context"]["standalone_question"] == "Where is it (parking)?"
    applied = {"request": {"attributes": {"locale": "en-GB"}}, "agent": None, "hidden_documents": 1}
    assert done["debug"]["filters"] == applied
    assert {c["title"] for c in done["debug"]["candidates"]} == {"Practice FAQ"}
    assert await log_rows(engine, agent) == [
        ("Where is it?", "Where is it (parking)?", "offline", applied, "answer", None, None)
    ]


# --- the semantic answer cache: what must end a reuse ----------------------------------------


@asynccontextmanager
async def semantic(
    database_url: str, semantic_settings: Settings, engine: Any, org: Any, **docs: Any
) -> AsyncIterator[tuple[Litestar, AsyncTestClient[Any], str, dict[str, Any], dict[str, Any]]]:
    """A service on the offline default embedder (whose semantic cache is on) and an agent
    over the fee list, which is tagged `fees` (and a second document, given as ``docs``)."""
    app = create_app(semantic_settings, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=app) as client:
        kb = await create_kb(client, org.headers, "Sunrise Dental")
        fees = await create_text_doc(
            client, org.headers, kb["id"], title="Fees", content=FEES, content_type="markdown", tags=["fees"]
        )
        extra = 0
        if docs:
            await create_text_doc(client, org.headers, kb["id"], **docs)
            extra = 1
        agent = await assign_new_agent(client, org.headers, kb["id"])
        assert await drain(make_ingestor(app, engine)) == {"ready": 1 + extra}
        yield app, client, agent, kb, fees


FIRST, PARAPHRASE = "How much is a filling?", "What does a filling cost?"


async def _reused(client: Any, org: Any, agent: str) -> dict[str, Any]:
    """The paraphrase is served from the first question's answer (the rule is not what stops
    the reuse in the test that follows)."""
    first = await ask(client, org.headers, agent, {"query": FIRST})
    assert (first["status"], first["answer"], first["cached"]) == (
        "answered",
        "A filling costs 150 dollars per tooth.",
        False,
    )
    hit = await ask(client, org.headers, agent, {"query": PARAPHRASE})
    assert (hit["answer"], hit["cached"]) == (first["answer"], True)
    return first


async def test_new_content_of_the_same_document_is_heard_not_the_old_answer(
    database_url, semantic_settings, engine, org
):
    async with semantic(database_url, semantic_settings, engine, org) as (app, client, agent, kb, fees):
        await _reused(client, org, agent)
        r = await client.put(
            f"/api/knowledge/{kb['id']}/documents/{fees['id']}",
            json={"content": FEES.replace("$150", "$175"), "content_type": "markdown"},
            headers=org.headers,
        )
        assert r.status_code == 200, r.text
        assert await drain(make_ingestor(app, engine)) == {"ready": 1}
        # A third wording, never asked: only the semantic cache could serve it the old answer.
        after = await ask(client, org.headers, agent, {"query": "What is the cost of a filling?"})
        assert (after["status"], after["answer"], after["cached"]) == (
            "answered",
            "A filling costs 175 dollars per tooth.",
            False,
        )


async def test_a_document_whose_window_ended_is_not_reused_without_a_write(
    database_url, semantic_settings, engine, org
):
    async with semantic(database_url, semantic_settings, engine, org) as (_app, client, agent, _kb, fees):
        await _reused(client, org, agent)
        # Time passing, not a write through the API: the KB's content version stays.
        async with engine.begin() as conn:
            await conn.execute(
                text("UPDATE documents SET expires_at = now() - interval '1 second' WHERE id = :i"),
                {"i": fees["id"]},
            )
        after = await ask(client, org.headers, agent, {"query": "What is the cost of a filling?"})
        assert (after["status"], after["answer"], after["cached"]) == ("not_found", NOT_FOUND, False)


async def test_a_call_whose_filters_hide_other_documents_is_answered_afresh(
    database_url, semantic_settings, engine, org
):
    hours = {"title": "Hours", "content": "Reception is staffed from 8 am.", "tags": ["hours"]}
    async with semantic(database_url, semantic_settings, engine, org, **hours) as (_app, client, agent, *_):
        first = await _reused(client, org, agent)
        fees_only = {"tags": {"any": ["fees"]}}
        other = await ask(
            client, org.headers, agent, {"query": "What is the cost of a filling?", "filters": fees_only}
        )
        assert (other["status"], other["answer"], other["cached"]) == ("answered", first["answer"], False)
        # The same filters again: a paraphrase within them is reused.
        again = await ask(client, org.headers, agent, {"query": PARAPHRASE, "filters": fees_only})
        assert (again["answer"], again["cached"]) == (first["answer"], True)
        semantic_questions = [row.semantic_question for row in await log_rows(engine, agent)]
        assert semantic_questions == [None, "how much is a filling", None, "what is the cost of a filling"]


async def test_the_agents_attribution_and_topics_apply_to_a_reused_answer(
    database_url, semantic_settings, engine, org
):
    async with semantic(database_url, semantic_settings, engine, org) as (_app, client, agent, *_):
        first = await _reused(client, org, agent)
        r = await client.put(
            f"/api/agents/{agent}/settings",
            json={"prompt_variant": None, "attribution": "spoken"},
            headers=org.headers,
        )
        assert r.status_code == 200, r.text
        spoken = await ask(client, org.headers, agent, {"query": "What is the cost of a filling?"})
        assert (spoken["answer"], spoken["cached"]) == (
            "According to our fees, a filling costs 150 dollars per tooth.",
            False,
        )
        r = await client.put(
            f"/api/agents/{agent}/settings",
            json={"prompt_variant": None, "escalation": {"on_not_found": "say", "topics": ["filling"]}},
            headers=org.headers,
        )
        assert r.status_code == 200, r.text
        # Reused (the scope did not change), and still handed over: the policy is applied on top.
        moved = await ask(client, org.headers, agent, {"query": "How much does a filling cost?"})
        assert moved["cached"] is True
        assert (moved["action"], moved["transfer_reason"], moved["sources"], moved["used_sources"]) == (
            "transfer",
            "topic:filling",
            [],
            [],
        )
        assert moved["answer"] != first["answer"]


# --- sources: the scores the docs describe, no padding ----------------------------------------


async def test_sources_scores_are_the_documented_fusion_and_nothing_pads_them(
    database_url, semantic_settings, engine, org
):
    hours = {"title": "Hours", "content": "Reception is staffed from 8 am.", "tags": ["hours"]}
    async with semantic(database_url, semantic_settings, engine, org, **hours) as (app, client, agent, *_):
        retriever = app.state.query_service.retriever
        weight, k = float(retriever.vector_weight), retriever.rrf_k
        body = await ask(client, org.headers, agent, {"query": FIRST}, debug="true")
    candidates = body["debug"]["candidates"]
    for c in candidates:
        expected = (weight / (k + c["vector_rank"]) if c["vector_rank"] else 0.0) + (
            1 / (k + c["text_rank"]) if c["text_rank"] else 0.0
        )
        assert c["score"] == pytest.approx(expected, abs=1e-5), c
    by_id = {c["chunk_id"]: c for c in candidates}
    best = candidates[0]["score"]
    used = body["used_sources"]
    expected_ids = used + [
        c["chunk_id"]
        for c in candidates
        if c["score"] > 0 and c["score"] >= SOURCE_SCORE_FLOOR * best and c["chunk_id"] not in used
    ]
    assert [s["chunk_id"] for s in body["sources"]] == expected_ids
    assert all(s["score"] == by_id[s["chunk_id"]]["score"] for s in body["sources"])
    assert used
    assert set(used) <= set(expected_ids)
    assert len(body["sources"]) < len(candidates)


# --- escalation: an apology is never a transfer ------------------------------------------------


async def test_unavailable_is_said_even_under_a_transferring_policy(
    database_url, settings, org, engine, drain_queue
):
    """The service cannot read the agent's context (its one pooled connection is taken): the
    apology, with `say_unavailable`; no policy is known then, so none hands the caller over."""
    small = settings.model_copy(
        update={
            "db": settings.db.model_copy(update={"pool_size": 1, "max_overflow": 0, "pool_timeout_s": 0.2})
        }
    )
    app = create_app(small, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=app) as client:
        kb = await create_kb(client, org.headers, "Dental FAQ")
        await create_text_doc(
            client, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
        )
        agent = await assign_new_agent(client, org.headers, kb["id"])
        assert await drain(make_ingestor(app, engine)) == {"ready": 1}
        r = await client.put(
            f"/api/agents/{agent}/settings",
            json={"prompt_variant": None, "escalation": {"on_not_found": "transfer", "topics": ["parking"]}},
            headers=org.headers,
        )
        assert r.status_code == 200, r.text
        service = app.state.query_service
        answer = service.query

        async def query_with_the_pool_taken(**kwargs: Any) -> Any:
            async with service.engine.connect():  # the pool's only connection
                return await answer(**kwargs)

        service.query = query_with_the_pool_taken
        try:
            body = await ask(client, org.headers, agent, {"query": "Is there free parking?"})
        finally:
            service.query = answer
        # The pool free again: the topic hands the same question over.
        again = await ask(client, org.headers, agent, {"query": "Is there free parking?"})
    assert (body["status"], body["action"], body["transfer_reason"], body["sources"]) == (
        "unavailable",
        "say_unavailable",
        None,
        [],
    )
    assert (again["action"], again["transfer_reason"]) == ("transfer", "topic:parking")
    assert [tuple(row)[4:6] for row in await log_rows(engine, agent)] == [
        ("say_unavailable", None),
        ("transfer", "topic:parking"),
    ]


# --- found by the audit of issue 19 -------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "fields"),
    [
        pytest.param(5, ["filters.attributes.locale"], id="a-number"),
        pytest.param("x" * 101, ["filters.attributes.locale"], id="an-oversized-value"),
        pytest.param({"in": []}, ["filters.attributes.locale"], id="an-empty-in"),
    ],
)
async def test_a_bad_attribute_condition_names_the_attribute_not_the_schema(
    client, org, faq_agent, condition, fields
):
    r = await post(
        client,
        org.headers,
        faq_agent["agent"],
        {"query": "Where?", "filters": {"attributes": {"locale": condition}}},
    )
    assert r.status_code == 422, r.text
    assert [f["field"] for f in r.json()["fields"]] == fields
    assert "ValueIn" not in r.text


async def _shop(client: Any, org: Any, drain_queue: Any, *windows: dict[str, Any]) -> tuple[str, Any]:
    kb = await create_kb(client, org.headers, "Shop help")
    titles = ["Old returns policy", "Shipping times"]
    for title, window in zip(titles, windows, strict=False):
        await create_text_doc(
            client, org.headers, kb["id"], title=title, content=f"{title}: three days.", **window
        )
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": len(windows)}
    r = await client.get(f"/api/agents/{agent}/tool", headers=org.headers)
    assert r.status_code == 200, r.text
    return agent, r.json()


EXPIRED = {"expires_at": "2020-01-01T00:00:00Z"}


async def test_a_tool_whose_every_document_expired_is_unavailable(client, org, drain_queue):
    agent, tool = await _shop(client, org, drain_queue, EXPIRED)
    body = await ask(client, org.headers, agent, {"query": "How long do returns take?"})
    assert body["status"] == "not_found"  # nothing can answer
    assert (tool["available"], tool["reason"]) == (False, "no_active_documents")


async def test_the_instructions_name_no_expired_document(client, org, drain_queue):
    _, tool = await _shop(client, org, drain_queue, EXPIRED, {})
    assert "Shipping times" in tool["instructions"]
    assert "Old returns policy" not in tool["instructions"]


async def test_the_declaration_offers_no_value_the_agents_fixed_filters_exclude(client, org, drain_queue):
    agent = await _tagged_agent(client, org, drain_queue)
    r = await client.put(
        f"/api/agents/{agent}/settings",
        json={"prompt_variant": None, "filters": {"attributes": {"locale": "en-GB"}}},
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    excluded = await ask(
        client,
        org.headers,
        agent,
        {"query": "Where can I park?", "filters": {"attributes": {"locale": "en-US"}}},
    )
    assert excluded["status"] == "not_found"
    r = await client.get(f"/api/agents/{agent}/tool", headers=org.headers)
    attributes = r.json()["tool"]["parameters"]["properties"]["filters"]["properties"]["attributes"]
    assert attributes["properties"]["locale"] == {"type": "string", "enum": ["en-GB"]}


# --- the console shows a document's window (item 2: "the console/API shows them as such") ---


async def test_the_console_shows_documents_outside_their_window_as_such(
    client, org, database_url, settings, drain_queue
):
    kb = await create_kb(client, org.headers, "Shop help")
    old = await create_text_doc(
        client,
        org.headers,
        kb["id"],
        title="Old policy",
        content="Returns within 14 days.",
        tags=["returns"],
        attributes={"locale": "en-GB"},
        expires_at="2020-01-01T00:00:00Z",
    )
    await create_text_doc(
        client,
        org.headers,
        kb["id"],
        title="Next policy",
        content="Returns within 45 days.",
        effective_from="2125-01-01T00:00:00Z",
    )
    await create_text_doc(client, org.headers, kb["id"], title="Shipping", content="Three days.")
    assert await drain_queue() == {"ready": 3}
    app = create_app(settings, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=app, base_url="http://testserver.local") as browser:
        await sign_in(browser, org.admin_key)
        listed = (await browser.get(f"/console/knowledge/{kb['id']}")).text
        shown = (await browser.get(f"/console/knowledge/{kb['id']}/documents/{old['id']}")).text
    badge = '<span class="status status-{0}" title="Outside its validity window: never retrieved">{1}</span>'
    assert listed.count(badge.format("expired", "expired")) == 1
    assert listed.count(badge.format("not_yet_effective", "not yet effective")) == 1
    assert listed.count("Outside its validity window") == 2  # Shipping is active: no badge
    assert badge.format("expired", "expired") in shown
    assert "<dt>Tags</dt><dd>returns</dd>" in shown
    assert "<dt>Attributes</dt><dd>locale: en-GB</dd>" in shown
    assert (
        '<dt>Expires</dt><dd><time datetime="2020-01-01T00:00:00+00:00">2020-01-01 00:00 UTC</time></dd>'
        in shown
    )
    assert "<dt>Effective from</dt>" not in shown


# --- fixed filters belong to one organisation's agent ----------------------------------------


async def test_another_organisations_fixed_filters_never_reach_this_agent(
    client, org, other_org, drain_queue
):
    agent = await _tagged_agent(client, org, drain_queue)
    fixed = {"prompt_variant": None, "filters": {"attributes": {"locale": "en-US"}}}
    r = await client.put(f"/api/agents/{agent}/settings", json=fixed, headers=other_org.headers)
    assert r.status_code == 404
    # The same agent id made theirs (a KB of theirs assigned), with their own fixed filters.
    theirs = await create_kb(client, other_org.headers, "Their help")
    await create_text_doc(
        client,
        other_org.headers,
        theirs["id"],
        title="Their parking",
        content="Park on level 9.",
        attributes={"locale": "en-US"},
    )
    r = await client.put(
        f"/api/knowledge/{theirs['id']}/agents", json={"agent_ids": [agent]}, headers=other_org.headers
    )
    assert r.status_code == 200, r.text
    assert await drain_queue() == {"ready": 1}
    r = await client.put(f"/api/agents/{agent}/settings", json=fixed, headers=other_org.headers)
    assert r.status_code == 200, r.text

    mine = await ask(client, org.headers, agent, {"query": "Where can I park?"}, debug="true")
    assert mine["debug"]["filters"] is None
    assert {c["title"] for c in mine["debug"]["candidates"]} == {"Practice FAQ", "US parking"}
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.json()["filters"] is None
    their_reply = await ask(client, other_org.headers, agent, {"query": "Where can I park?"}, debug="true")
    assert their_reply["debug"]["filters"] == {
        "request": None,
        "agent": {"attributes": {"locale": "en-US"}},
        "hidden_documents": 0,
    }
    assert {c["title"] for c in their_reply["debug"]["candidates"]} == {"Their parking"}
