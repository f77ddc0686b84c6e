"""The playground (POST /api/agents/{id}/playground): query_knowledge's own path as a dry
run: the reply, both retrievers' candidates, the fused list, the model's exact messages;
nothing logged or cached."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.ingestion.worker import drain
from app.main import create_app
from tests.conftest import fake_resolver, make_ingestor, make_org
from tests.helpers import assign_new_agent, bearer, create_kb, create_key, create_text_doc
from tests.query.conftest import FAQ, OPENAI_BASE, chat_reply, llm_settings, sent_json

CHAT = f"{OPENAI_BASE}/chat/completions"
PARKING = "Free parking is available behind the building, entrance on Elm Street."


@pytest.fixture
def llm_app(database_url, settings, respx_mock):
    return create_app(
        llm_settings(settings), database_url=database_url, resolver=fake_resolver, run_workers=False
    )


async def _agent(c: Any, org: Any, app: Any, engine: Any) -> str:
    kb = await create_kb(c, org.headers, "Dental FAQ")
    await create_text_doc(
        c, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    agent = await assign_new_agent(c, org.headers, kb["id"])
    assert await drain(make_ingestor(app, engine)) == {"ready": 1}
    return agent


async def _play(c: Any, headers: dict[str, str], agent: str, **body: Any) -> Any:
    return await c.post(f"/api/agents/{agent}/playground", json=body, headers=headers)


async def _count(engine: Any, table: str) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def test_two_variants_send_their_own_messages_and_nothing_is_logged(llm_app, org, engine, respx_mock):
    route = respx_mock.post(CHAT).mock(return_value=chat_reply("Behind the building, on Elm Street."))
    async with AsyncTestClient(app=llm_app) as c:
        agent = await _agent(c, org, llm_app, engine)
        r = await _play(c, org.headers, agent, query="Where can I park?", compare_variant="concise")
        gaps = await c.get("/api/knowledge-gaps", headers=org.headers)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["query"], body["skip_model"]) == ("Where can I park?", False)
    first, second = body["runs"]
    assert (first["variant"], second["variant"]) == ("default", "concise")
    # The messages shown are exactly those the model was sent, one call per variant.
    assert route.call_count == 2
    sent = [sent_json(route, 0), sent_json(route, 1)]
    assert first["messages"] == sent[0]["messages"]
    assert second["messages"] == sent[1]["messages"]
    assert (sent[0]["max_tokens"], sent[1]["max_tokens"]) == (200, 120)
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][0]["content"] != second["messages"][0]["content"]
    assert "one or two short sentences" in second["messages"][0]["content"]
    assert first["messages"][1] == second["messages"][1]
    assert "Where can I park?" in first["messages"][1]["content"]
    assert PARKING in first["messages"][1]["content"]
    assert first["prompt_version"] != second["prompt_version"]
    for run in (first, second):
        assert (run["status"], run["action"], run["answer"]) == (
            "answered",
            "answer",
            "Behind the building, on Elm Street.",
        )
        assert (run["model"], run["answered_by"], run["model_called"]) == ("gpt-4o-mini", "gpt-4o-mini", True)
        assert run["tokens"] == {"prompt": 120, "completion": 12}
        assert run["timings_ms"]["llm"] > 0
    # A dry run is never logged (so never a knowledge gap) and never cached.
    assert await _count(engine, "query_log") == 0
    assert await _count(engine, "answer_cache") == 0
    assert gaps.json() == []


async def test_skip_model_answers_offline_and_shows_the_messages_it_would_send(
    llm_app, org, engine, respx_mock
):
    route = respx_mock.post(CHAT).mock(return_value=chat_reply("should not be asked"))
    async with AsyncTestClient(app=llm_app) as c:
        agent = await _agent(c, org, llm_app, engine)
        r = await _play(c, org.headers, agent, query="Where can I park?", skip_model=True)
    assert r.status_code == 200, r.text
    (run,) = r.json()["runs"]
    assert route.called is False
    assert (run["status"], run["answer"]) == ("answered", PARKING)
    assert (run["answered_by"], run["model"], run["model_called"]) == ("extractive", "gpt-4o-mini", False)
    assert run["timings_ms"]["llm"] == 0
    system, user = run["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    assert "Where can I park?" in user["content"]
    assert user["content"].count("<source ") == len(run["fused"])


async def test_a_failing_model_is_shown_with_the_reply_read_from_the_chunks(llm_app, org, engine, respx_mock):
    route = respx_mock.post(CHAT).mock(return_value=httpx.Response(500, json={"error": {"message": "boom"}}))
    async with AsyncTestClient(app=llm_app) as c:
        agent = await _agent(c, org, llm_app, engine)
        r = await _play(c, org.headers, agent, query="Where can I park?")
    (run,) = r.json()["runs"]
    assert route.call_count == 1
    assert sent_json(route)["messages"] == run["messages"]
    assert (run["status"], run["degraded"], run["answer"]) == ("answered", True, PARKING)
    assert (run["answered_by"], run["model_called"]) == ("extractive", True)
    assert run["model_error"] == "the model answered HTTP 500"
    assert await _count(engine, "query_log") == 0


PARKING_TURNS = [
    {"role": "user", "content": "Where can I park?"},
    {"role": "assistant", "content": "Behind the building, entrance on Elm Street."},
]


async def test_history_makes_the_follow_up_standalone_and_shows_the_rewrite_sent(
    llm_app, org, engine, respx_mock
):
    route = respx_mock.post(CHAT).mock(
        side_effect=[chat_reply("Is the parking behind the building free?"), chat_reply("Yes, it is free.")]
    )
    async with AsyncTestClient(app=llm_app) as c:
        agent = await _agent(c, org, llm_app, engine)
        r = await _play(c, org.headers, agent, query="Is it free?", history=PARKING_TURNS)
    assert r.status_code == 200, r.text
    (run,) = r.json()["runs"]
    assert route.call_count == 2
    context = run["context"]
    assert (context["question"], context["standalone_question"], context["method"]) == (
        "Is it free?",
        "Is the parking behind the building free?",
        "model",
    )
    # The rewrite's messages are shown exactly as sent, the earlier turns in them.
    assert context["rewrite_messages"] == sent_json(route, 0)["messages"]
    assert "Behind the building, entrance on Elm Street." in context["rewrite_messages"][-1]["content"]
    # The answer is asked for the standalone question, and that is what the run shows.
    assert run["messages"] == sent_json(route, 1)["messages"]
    assert "Is the parking behind the building free?" in run["messages"][1]["content"]
    assert run["answer"] == "Yes, it is free."
    assert await _count(engine, "query_log") == 0


async def test_skip_model_makes_the_follow_up_standalone_offline(llm_app, org, engine, respx_mock):
    route = respx_mock.post(CHAT).mock(return_value=chat_reply("should not be asked"))
    async with AsyncTestClient(app=llm_app) as c:
        agent = await _agent(c, org, llm_app, engine)
        r = await _play(c, org.headers, agent, query="Is it free?", history=PARKING_TURNS, skip_model=True)
    assert r.status_code == 200, r.text
    (run,) = r.json()["runs"]
    assert route.called is False
    context = run["context"]
    assert context["method"] == "offline"
    assert "park" in context["standalone_question"]
    assert "rewrite_messages" not in context
    assert context["standalone_question"] in run["messages"][1]["content"]


async def test_without_history_the_question_is_taken_as_it_is(client, org, faq_agent):
    r = await _play(client, org.headers, faq_agent["agent"], query="Where can I park?")
    (run,) = r.json()["runs"]
    assert (run["context"]["standalone_question"], run["context"]["method"]) == ("Where can I park?", "none")


async def test_lists_both_retrievers_and_the_fused_list_of_query_knowledge(client, org, faq_agent, engine):
    agent = faq_agent["agent"]
    question = "Do you take credit cards?"
    r = await _play(client, org.headers, agent, query=question)
    assert r.status_code == 200, r.text
    (run,) = r.json()["runs"]
    debug = await client.post(
        f"/api/agents/{agent}/query_knowledge",
        json={"query": question},
        headers=org.headers,
        params={"debug": "true"},
    )
    real = debug.json()
    # The playground's reply and fused list are query_knowledge's own.
    assert (run["answer"], run["status"], run["confidence"]) == (
        real["answer"],
        real["status"],
        real["confidence"],
    )
    assert [h["chunk_id"] for h in run["fused"]] == [c["chunk_id"] for c in real["debug"]["candidates"]]
    assert [h["rank"] for h in run["fused"]] == list(range(1, len(run["fused"]) + 1))
    assert run["fused"][0]["section"] == "Payments"
    # Every candidate of each list, in its own order, with the fused score it got.
    bm25, vector = run["bm25"], run["vector"]
    assert [h["rank"] for h in bm25] == list(range(1, len(bm25) + 1))
    assert [h["rank"] for h in vector] == list(range(1, len(vector) + 1))
    assert bm25[0]["section"] == "Payments"
    assert [h["score"] for h in bm25] == sorted((h["score"] for h in bm25), reverse=True)
    assert [h["score"] for h in vector] == sorted((h["score"] for h in vector), reverse=True)
    fused_by_id = {h["chunk_id"]: h for h in run["fused"]}
    for hit in bm25:
        if hit["chunk_id"] in fused_by_id:
            assert fused_by_id[hit["chunk_id"]]["text_rank"] == hit["rank"]
            assert fused_by_id[hit["chunk_id"]]["score"] == hit["fused_score"]
    chunks = await _count(engine, "chunks")
    assert len(vector) == chunks  # fewer chunks than ``candidates``: the vectors rank them all
    assert (run["plan"], run["embedded"]) == ("exact", True)
    # No model is set up: the messages are what one would be sent.
    assert (run["model"], run["answered_by"], run["model_called"]) == (None, "extractive", False)
    assert question in run["messages"][1]["content"]
    # Only the real call is in the log.
    assert await _count(engine, "query_log") == 1


async def test_a_dry_run_neither_reads_nor_writes_the_answer_cache(client, org, faq_agent, engine):
    agent = faq_agent["agent"]
    question = "When are you open on Saturdays?"
    for _ in range(2):
        r = await _play(client, org.headers, agent, query=question)
        assert r.status_code == 200, r.text
    assert await _count(engine, "answer_cache") == 0
    real = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers
    )
    assert real.json()["cached"] is False
    assert await _count(engine, "answer_cache") == 1
    # With the real call's answer cached, a dry run still retrieves (a cached reply has no lists).
    again = (await _play(client, org.headers, agent, query=question)).json()["runs"][0]
    assert again["fused"][0]["section"] == "Opening hours"
    assert again["bm25"] != []


async def test_a_dry_run_of_an_unknown_question_is_no_knowledge_gap(client, org, faq_agent):
    agent = faq_agent["agent"]
    question = "Who painted the Mona Lisa?"
    r = await _play(client, org.headers, agent, query=question)
    assert r.json()["runs"][0]["status"] == "not_found"
    assert (await client.get("/api/knowledge-gaps", headers=org.headers)).json() == []
    # The same question asked for real is one.
    await client.post(f"/api/agents/{agent}/query_knowledge", json={"query": question}, headers=org.headers)
    gaps = (await client.get("/api/knowledge-gaps", headers=org.headers)).json()
    assert [g["question"] for g in gaps] == [question]


async def test_the_agents_own_variant_answers_unless_one_is_given(client, org, faq_agent):
    agent = faq_agent["agent"]
    r = await client.put(
        f"/api/agents/{agent}/settings", json={"prompt_variant": "concise"}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    own = await _play(client, org.headers, agent, query="Where can I park?")
    given = await _play(client, org.headers, agent, query="Where can I park?", variant="default")
    assert own.json()["runs"][0]["variant"] == "concise"
    assert given.json()["runs"][0]["variant"] == "default"


async def test_an_agent_without_knowledge_answers_not_found_with_empty_lists(client, org, sessionmaker):
    kb = await create_kb(client, org.headers, "Empty")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    r = await _play(client, org.headers, agent, query="Where can I park?")
    assert r.status_code == 200, r.text
    (run,) = r.json()["runs"]
    assert (run["status"], run["bm25"], run["vector"], run["fused"], run["messages"]) == (
        "not_found",
        [],
        [],
        [],
        None,
    )


async def test_another_orgs_agent_is_not_found(client, org, faq_agent, sessionmaker, engine):
    other = await make_org(sessionmaker, "Other")
    r = await _play(client, other.headers, faq_agent["agent"], query="Where can I park?")
    assert r.status_code == 404, r.text
    assert r.json()["error"] == "not_found"
    assert await _count(engine, "query_log") == 0


async def test_query_keys_are_refused(client, org, faq_agent):
    key = await create_key(client, org.headers, "query")
    r = await _play(client, bearer(key["key"]), faq_agent["agent"], query="Where can I park?")
    assert r.status_code == 403, r.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "Where?", "variant": "nope"}, "variant"),
        ({"query": "Where?", "compare_variant": "nope"}, "compare_variant"),
        ({"query": "   "}, "query"),
        ({"query": "Where?", "debug": True}, "debug"),
        ({"query": "Where?", "skip_model": 1}, "skip_model"),
        ({"query": "Where?", "history": [{"role": "system", "content": "hi"}]}, "history"),
        ({"query": "Where?", "history": [{"role": "user", "content": "hi"}] * 21}, "history"),
    ],
    ids=[
        "variant",
        "compare_variant",
        "blank",
        "unknown-field",
        "skip_model-not-boolean",
        "history-role",
        "history-too-many-turns",
    ],
)
async def test_bad_input_is_refused(client, org, faq_agent, body, field):
    r = await _play(client, org.headers, faq_agent["agent"], **body)
    assert r.status_code == 422, r.text
    assert field in r.text
