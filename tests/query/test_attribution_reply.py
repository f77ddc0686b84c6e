"""Spoken attribution and `used_sources` on query_knowledge's reply: the agent's setting,
the phrase read out offline, the titles and instruction the model is given, and the log."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.ingestion.worker import drain
from app.main import create_app
from app.prompting import PromptLibrary
from tests.conftest import fake_resolver, make_ingestor
from tests.helpers import assign_new_agent, create_kb, create_text_doc
from tests.query.conftest import OPENAI_BASE, chat_reply, llm_settings, sent_json

CHAT = f"{OPENAI_BASE}/chat/completions"
PROMPTS = PromptLibrary.load(Path(__file__).resolve().parents[2] / "prompts").get()
NOT_FOUND_LINE = PROMPTS.not_found_reply

# Two one-chunk documents: one titled like a file, one with nothing speakable in its title.
RETURNS_TITLE = "returns_policy_v2.pdf"
RETURNS = "You can return an unused item within 30 days for a full refund."
GIFT_TITLE = "doc1"
GIFT = "Gift cards never expire and can be used in any of our shops."
RETURN_QUESTION = "Can I return an unused item for a refund?"
GIFT_QUESTION = "Do gift cards expire?"


async def _agent(client: Any, org: Any, engine: Any, drain_queue: Any) -> tuple[str, dict[str, int]]:
    """The agent and each document's chunk id, by title."""
    kb = await create_kb(client, org.headers, "Shop")
    docs = {
        title: await create_text_doc(client, org.headers, kb["id"], title=title, content=content)
        for title, content in ((RETURNS_TITLE, RETURNS), (GIFT_TITLE, GIFT))
    }
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 2}
    return agent, await _chunk_ids(engine, docs)


async def _chunk_ids(engine: Any, docs: dict[str, dict[str, Any]]) -> dict[str, int]:
    async with engine.connect() as conn:
        rows = (await conn.execute(text("SELECT document_id, id FROM chunks"))).all()
    by_document = {r.document_id: r.id for r in rows}
    assert len(by_document) == 2
    return {title: by_document[uuid.UUID(doc["id"])] for title, doc in docs.items()}


async def _set(client: Any, org: Any, agent: str, **settings: Any) -> dict[str, Any]:
    r = await client.put(
        f"/api/agents/{agent}/settings", json={"prompt_variant": None, **settings}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def _ask(client: Any, org: Any, agent: str, query: str, **params: str) -> dict[str, Any]:
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": query}, headers=org.headers, params=params
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def _logged(client: Any, org: Any, agent: str) -> list[tuple[str, str, list[int] | None]]:
    r = await client.get(f"/api/agents/{agent}/queries", headers=org.headers)
    assert r.status_code == 200
    return [(q["status"], q["answer"], q["used_sources"]) for q in r.json()["items"]]


def _source_ids(body: dict[str, Any]) -> list[int]:
    return [s["chunk_id"] for s in body["sources"]]


@pytest.fixture
def semantic_app(database_url, semantic_settings):
    return create_app(semantic_settings, database_url=database_url, resolver=fake_resolver, run_workers=False)


# --- the setting -----------------------------------------------------------------------------


async def test_attribution_is_off_until_set_and_kept_when_left_out(client, org, engine, drain_queue):
    agent, _ = await _agent(client, org, engine, drain_queue)
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.json()["attribution"] == "off"
    assert (await _set(client, org, agent, attribution="spoken"))["attribution"] == "spoken"
    # Left out, it stays; the escalation policy changes beside it.
    body = await _set(client, org, agent, escalation={"on_not_found": "transfer", "topics": []})
    assert (body["attribution"], body["escalation"]["on_not_found"]) == ("spoken", "transfer")
    r = await client.put(
        f"/api/agents/{agent}/settings",
        json={"prompt_variant": None, "attribution": "loud"},
        headers=org.headers,
    )
    assert r.status_code == 422
    assert r.json()["fields"] == [{"field": "attribution", "message": "Input should be 'off' or 'spoken'"}]
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.json()["attribution"] == "spoken"


async def test_another_organisations_agent_settings_are_404(client, org, other_org, engine, drain_queue):
    agent, _ = await _agent(client, org, engine, drain_queue)
    r = await client.put(
        f"/api/agents/{agent}/settings",
        json={"prompt_variant": None, "attribution": "spoken"},
        headers=other_org.headers,
    )
    assert r.status_code == 404
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.json()["attribution"] == "off"


# --- offline ---------------------------------------------------------------------------------


async def test_off_answers_as_before_and_lists_the_chunk_read(client, org, engine, drain_queue):
    agent, chunks = await _agent(client, org, engine, drain_queue)
    body = await _ask(client, org, agent, RETURN_QUESTION)
    assert (body["status"], body["answer"]) == ("answered", RETURNS)
    assert body["used_sources"] == [chunks[RETURNS_TITLE]]
    assert _source_ids(body)[0] == chunks[RETURNS_TITLE]


async def test_spoken_offline_leads_with_the_speakable_title(client, org, engine, drain_queue):
    agent, chunks = await _agent(client, org, engine, drain_queue)
    off = await _ask(client, org, agent, RETURN_QUESTION)
    await _set(client, org, agent, attribution="spoken")
    # The answer cache keys spoken answers apart: the phrase is heard at once.
    body = await _ask(client, org, agent, RETURN_QUESTION, debug="true")
    assert (body["status"], body["cached"]) == ("answered", False)
    assert body["answer"] == (
        "According to our returns policy, you can return an unused item within 30 days for a full refund."
    )
    assert body["used_sources"] == [chunks[RETURNS_TITLE]]
    assert set(body["used_sources"]) <= set(_source_ids(body))
    assert body["debug"]["attribution"] == {
        "mode": "spoken",
        "spoken_title": "returns policy",
        "used_sources_from": "the sentences read out",
    }
    cached = await _ask(client, org, agent, RETURN_QUESTION)
    assert (cached["cached"], cached["answer"], cached["used_sources"]) == (
        True,
        body["answer"],
        [chunks[RETURNS_TITLE]],
    )
    # Off again: the answer cached before, without the phrase.
    await _set(client, org, agent, attribution="off")
    again = await _ask(client, org, agent, RETURN_QUESTION)
    assert (again["cached"], again["answer"]) == (True, off["answer"])
    assert await _logged(client, org, agent) == [
        ("answered", RETURNS, [chunks[RETURNS_TITLE]]),
        ("answered", body["answer"], [chunks[RETURNS_TITLE]]),
        ("answered", body["answer"], [chunks[RETURNS_TITLE]]),
        ("answered", RETURNS, [chunks[RETURNS_TITLE]]),
    ]


async def test_spoken_offline_names_no_unspeakable_title(client, org, engine, drain_queue):
    agent, chunks = await _agent(client, org, engine, drain_queue)
    await _set(client, org, agent, attribution="spoken")
    body = await _ask(client, org, agent, GIFT_QUESTION, debug="true")
    assert (body["status"], body["answer"]) == ("answered", GIFT)
    assert body["used_sources"] == [chunks[GIFT_TITLE]]
    assert body["debug"]["attribution"]["spoken_title"] is None


async def test_spoken_with_the_offline_default_embedder(semantic_app, org, engine):
    """The sentence chosen by meaning (minilm, the default without a key) is led by the title
    of its own document."""
    async with AsyncTestClient(app=semantic_app) as c:
        agent, chunks = await _llm_agent(c, org, semantic_app, engine)
        await _set(c, org, agent, attribution="spoken")
        body = await _ask(c, org, agent, "How many days do I have to send something back?")
        logged = await _logged(c, org, agent)
    assert (body["status"], body["answer"]) == (
        "answered",
        "According to our returns policy, you can return an unused item within 30 days for a full refund.",
    )
    assert body["used_sources"] == [chunks[RETURNS_TITLE]]
    assert logged == [("answered", body["answer"], [chunks[RETURNS_TITLE]])]


async def test_not_found_and_transfer_name_nothing_and_use_nothing(client, org, engine, drain_queue):
    agent, _ = await _agent(client, org, engine, drain_queue)
    await _set(client, org, agent, attribution="spoken")
    body = await _ask(client, org, agent, "What is the capital of Mongolia?", debug="true")
    assert (body["status"], body["answer"], body["sources"], body["used_sources"]) == (
        "not_found",
        NOT_FOUND_LINE,
        [],
        [],
    )
    assert body["debug"]["attribution"] == {"mode": "spoken", "spoken_title": None, "used_sources_from": None}
    await _set(client, org, agent, escalation={"on_not_found": "say", "topics": ["refund"]})
    body = await _ask(client, org, agent, "Can I get a refund within 30 days?")
    assert (body["action"], body["answer"], body["used_sources"]) == ("transfer", PROMPTS.transfer_reply, [])
    assert await _logged(client, org, agent) == [
        ("answered", PROMPTS.transfer_reply, []),
        ("not_found", NOT_FOUND_LINE, []),
    ]


# --- with the answering model ----------------------------------------------------------------


@pytest.fixture
async def llm_app(database_url, settings, respx_mock):
    return create_app(
        llm_settings(settings), database_url=database_url, resolver=fake_resolver, run_workers=False
    )


async def _llm_agent(c: Any, org: Any, app: Any, engine: Any) -> tuple[str, dict[str, int]]:
    kb = await create_kb(c, org.headers, "Shop")
    docs = {
        title: await create_text_doc(c, org.headers, kb["id"], title=title, content=content)
        for title, content in ((RETURNS_TITLE, RETURNS), (GIFT_TITLE, GIFT))
    }
    agent = await assign_new_agent(c, org.headers, kb["id"])
    assert await drain(make_ingestor(app, engine)) == {"ready": 2}
    return agent, await _chunk_ids(engine, docs)


def _knowledge(*, spoken: bool, gift_first: bool = False) -> str:
    """The knowledge block as sent: "doc1" never gets a spoken title."""
    returns = ' spoken_title="returns policy"' if spoken else ""
    sources = [
        f'title="{RETURNS_TITLE}"{returns}>\n{RETURNS}\n</source>',
        f'title="{GIFT_TITLE}">\n{GIFT}\n</source>',
    ]
    if gift_first:
        sources.reverse()
    return "\n".join(
        ["<knowledge>", *(f'<source n="{n}" {s}' for n, s in enumerate(sources, 1)), "</knowledge>"]
    )


def _user(knowledge: str, question: str = RETURN_QUESTION) -> str:
    return (
        f"Knowledge:\n{knowledge}\n\nCaller's question: {question}\n\n"
        "Answer the question from the knowledge above only, or reply with exactly NOT_FOUND."
    )


async def test_spoken_with_the_model_sends_titles_and_the_instruction(llm_app, org, engine, respx_mock):
    said = "According to our returns policy, you can return an unused item within 30 days."
    route = respx_mock.post(CHAT).mock(return_value=chat_reply(said))
    async with AsyncTestClient(app=llm_app) as c:
        agent, chunks = await _llm_agent(c, org, llm_app, engine)
        await _set(c, org, agent, attribution="spoken")
        body = await _ask(c, org, agent, RETURN_QUESTION, debug="true")
        logged = await _logged(c, org, agent)
    system = PROMPTS.system_message(max_words=60)
    instruction = PROMPTS.system_message(max_words=60, attribution=True).removeprefix(system)
    assert instruction.startswith("\n\nThis business wants callers to hear where an answer comes from.")
    assert sent_json(route)["messages"] == [
        {"role": "system", "content": system + instruction},
        {"role": "user", "content": _user(_knowledge(spoken=True))},
    ]
    # The model names the source itself: no second phrase.
    assert (body["status"], body["answer"]) == ("answered", said)
    assert body["used_sources"] == [chunks[RETURNS_TITLE]]
    assert set(body["used_sources"]) <= set(_source_ids(body))
    assert body["debug"]["attribution"] == {
        "mode": "spoken",
        "spoken_title": None,
        "used_sources_from": "overlap with the model's answer",
    }
    assert logged == [("answered", said, [chunks[RETURNS_TITLE]])]


async def test_off_with_the_model_sends_what_it_always_sent(llm_app, org, engine, respx_mock):
    said = "Gift cards never expire, and you can use them in any of our shops."
    route = respx_mock.post(CHAT).mock(return_value=chat_reply(said))
    async with AsyncTestClient(app=llm_app) as c:
        agent, chunks = await _llm_agent(c, org, llm_app, engine)
        body = await _ask(c, org, agent, GIFT_QUESTION)
    assert sent_json(route)["messages"] == [
        {"role": "system", "content": PROMPTS.system_message(max_words=60)},
        {"role": "user", "content": _user(_knowledge(spoken=False, gift_first=True), GIFT_QUESTION)},
    ]
    assert (body["answer"], body["used_sources"]) == (said, [chunks[GIFT_TITLE]])
    assert _source_ids(body)[0] == chunks[GIFT_TITLE]


async def test_a_model_answer_from_the_second_passage_lists_it_first(llm_app, org, engine, respx_mock):
    """The model answers from the gift-card passage, ranked second for this question: that
    chunk is the one used, and it leads the sources."""
    said = "Gift cards can be used in any of our shops and never expire."
    question = "Can I return an unused item I paid for with a gift card?"
    route = respx_mock.post(CHAT).mock(return_value=chat_reply(said))
    async with AsyncTestClient(app=llm_app) as c:
        agent, chunks = await _llm_agent(c, org, llm_app, engine)
        body = await _ask(c, org, agent, question)
    assert sent_json(route)["messages"][1]["content"] == _user(_knowledge(spoken=False), question)
    assert body["used_sources"] == [chunks[GIFT_TITLE]]
    assert _source_ids(body) == [chunks[GIFT_TITLE], chunks[RETURNS_TITLE]]


async def test_a_citation_the_model_writes_is_not_spoken(llm_app, org, engine, respx_mock):
    respx_mock.post(CHAT).mock(return_value=chat_reply("You can return an unused item within 30 days [1]."))
    async with AsyncTestClient(app=llm_app) as c:
        agent, chunks = await _llm_agent(c, org, llm_app, engine)
        body = await _ask(c, org, agent, RETURN_QUESTION)
    assert (body["answer"], body["used_sources"]) == (
        "You can return an unused item within 30 days.",
        [chunks[RETURNS_TITLE]],
    )


async def test_the_model_failing_reads_out_the_sentence_with_the_phrase(llm_app, org, engine, respx_mock):
    route = respx_mock.post(CHAT).respond(500, json={"error": {"message": "boom"}})
    async with AsyncTestClient(app=llm_app) as c:
        agent, chunks = await _llm_agent(c, org, llm_app, engine)
        await _set(c, org, agent, attribution="spoken")
        body = await _ask(c, org, agent, RETURN_QUESTION)
    assert route.call_count == 1
    assert sent_json(route)["messages"][1]["content"] == _user(_knowledge(spoken=True))
    assert (body["status"], body["degraded"]) == ("answered", True)
    assert body["answer"] == (
        "According to our returns policy, you can return an unused item within 30 days for a full refund."
    )
    assert body["used_sources"] == [chunks[RETURNS_TITLE]]
