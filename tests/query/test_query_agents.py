"""Agents known to an organisation, the tool declaration's variant and size, the
answer cache's key and pruning, and start-up checks of the query settings."""

from __future__ import annotations

import shutil
import uuid
from array import array
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from app.agents.service import AGENT_NOT_FOUND
from app.config import Settings
from app.main import create_app
from app.prompting import PromptLibrary
from app.query.tool_service import ToolService, check_tool_prompts
from tests.conftest import fake_resolver, make_ingestor
from tests.helpers import (
    assign_new_agent,
    bearer,
    create_kb,
    create_key,
    create_text_doc,
    store_removed_variant,
)
from tests.query.conftest import FAQ, OPENAI_BASE, chat_reply, llm_settings

PROJECT_PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
CHAT = f"{OPENAI_BASE}/chat/completions"
WARM_DESCRIPTION = "Warmly looks up what callers ask about: $knowledge_summary."


async def _faq_agent(client: Any, org: Any, app: Any, drain_queue: Any) -> str:
    """The faq_agent fixture's set-up, on an app a test built with its own settings."""
    kb = await create_kb(client, org.headers, "Dental FAQ")
    await create_text_doc(
        client, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue(app) == {"ready": 1}
    return agent


async def _ask(client: Any, headers: dict[str, str], agent: str, query: str) -> Any:
    return await client.post(f"/api/agents/{agent}/query_knowledge", json={"query": query}, headers=headers)


async def test_agent_whose_last_kb_is_unassigned_hears_not_found(client, org, faq_agent):
    agent, kb = faq_agent["agent"], faq_agent["kb"]["id"]
    assert (await _ask(client, org.headers, agent, "Where can I park?")).json()["status"] == "answered"
    r = await client.put(f"/api/knowledge/{kb}/agents", json={"agent_ids": []}, headers=org.headers)
    assert r.status_code == 200
    r = await _ask(client, org.headers, agent, "Where can I park?")
    assert r.status_code == 200
    body = r.json()
    assert (body["status"], body["answer"], body["sources"], body["cached"]) == (
        "not_found",
        "I'm sorry, I don't have that information.",
        [],
        False,
    )


async def test_agent_never_assigned_here_is_404_even_if_known_elsewhere(client, org, other_org, faq_agent):
    # faq_agent is known to org; other_org never assigned it.
    r = await _ask(client, other_org.headers, faq_agent["agent"], "Where can I park?")
    assert r.status_code == 404
    assert "agent not found" in r.json()["detail"]
    r = await _ask(client, org.headers, str(uuid.uuid4()), "Where can I park?")
    assert r.status_code == 404


async def test_assignment_registers_the_agent_in_its_organisation_only(client, org, other_org, engine):
    kb = await create_kb(client, org.headers, "Dental FAQ")
    agent = str(uuid.uuid4())
    r = await client.put(
        f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers
    )
    assert r.status_code == 200
    async with engine.connect() as conn:
        rows = (
            await conn.execute(text("SELECT org_id FROM agents WHERE agent_id = :a"), {"a": uuid.UUID(agent)})
        ).all()
    assert [r.org_id for r in rows] == [org.id]
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.status_code == 200
    r = await client.get(f"/api/agents/{agent}/settings", headers=other_org.headers)
    assert r.status_code == 404


def _prompts_with_warm_variant(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    shutil.copytree(PROJECT_PROMPTS, folder)
    warm = folder / "variants" / "warm"
    warm.mkdir()
    (warm / "tool.description.md").write_text(f'+++\nversion = "warm-1"\n+++\n{WARM_DESCRIPTION}\n')
    return folder


@pytest.fixture
async def warm_app(database_url, settings, tmp_path):
    def build(**query: Any) -> Any:
        configured = settings.model_copy(
            update={
                "prompts_dir": _prompts_with_warm_variant(tmp_path),
                "query": settings.query.model_copy(update=query),
            }
        )
        return create_app(configured, database_url=database_url, resolver=fake_resolver, run_workers=False)

    return build


async def _tool(client: Any, headers: dict[str, str], agent: str, fmt: str = "openai-realtime") -> Any:
    r = await client.get(f"/api/agents/{agent}/tool", params={"format": fmt}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


async def test_tool_is_declared_in_the_agents_prompt_variant(warm_app, org, drain_queue):
    app = warm_app()
    async with AsyncTestClient(app=app) as c:
        agent = await _faq_agent(c, org, app, drain_queue)
        before = await _tool(c, org.headers, agent)
        r = await c.put(f"/api/agents/{agent}/settings", json={"prompt_variant": "warm"}, headers=org.headers)
        assert r.status_code == 200
        after = await _tool(c, org.headers, agent)
    assert before["tool"]["description"].startswith("Looks up the answer to a caller's question")
    assert after["tool"]["description"] == "Warmly looks up what callers ask about: Dental FAQ: Practice FAQ."
    assert after["prompt_version"].startswith("warm:")


async def test_tool_uses_the_configured_default_variant(warm_app, org):
    app = warm_app(prompt_variant="warm")
    async with AsyncTestClient(app=app) as c:
        kb = await create_kb(c, org.headers, "Dental FAQ")
        agent = await assign_new_agent(c, org.headers, kb["id"])
        body = await _tool(c, org.headers, agent)
    assert body["tool"]["description"] == "Warmly looks up what callers ask about: Dental FAQ."


async def test_openai_descriptions_stay_within_1024_characters(client, org, engine):
    kb = await create_kb(client, org.headers, "Clinic handbook", description="Everything about the clinic")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    # Forty documents whose chunks answer: named in the summary without indexing each one.
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO documents (id, org_id, kb_id, title, description, status, source_kind, chunk_count,"
                " created_at) SELECT gen_random_uuid(), :org, :kb, 'Procedure ' || i || ' for patients',"
                " 'How step ' || i || ' of the treatment goes', 'ready', 'text', 3,"
                " now() - make_interval(secs => 40 - i) FROM generate_series(1, 40) AS i"
            ),
            {"org": org.id, "kb": uuid.UUID(kb["id"])},
        )
    chat = await _tool(client, org.headers, agent, "openai-chat")
    realtime = await _tool(client, org.headers, agent, "openai-realtime")
    gemini = await _tool(client, org.headers, agent, "gemini")
    chat_description = chat["tool"]["function"]["description"]
    gemini_description = gemini["tool"]["functionDeclarations"][0]["description"]
    assert 900 < len(chat_description) <= 1024
    assert realtime["tool"]["description"] == chat_description
    assert chat_description.endswith(", and more.")
    # Gemini and the instructions keep the longer summary.
    assert len(gemini_description) > 1024
    assert "Procedure 40 for patients" not in chat_description
    assert chat["instructions"].count("Procedure ") > chat_description.count("Procedure ")


async def test_tool_names_documents_whose_chunks_answer(client, org, engine):
    kb = await create_kb(client, org.headers, "Dental FAQ")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO documents (id, org_id, kb_id, title, status, source_kind, chunk_count) VALUES"
                " (gen_random_uuid(), :org, :kb, 'Price list', 'failed', 'text', 4),"
                " (gen_random_uuid(), :org, :kb, 'Never indexed', 'failed', 'text', 0),"
                " (gen_random_uuid(), :org, :kb, 'Still queued', 'pending', 'text', 0)"
            ),
            {"org": org.id, "kb": uuid.UUID(kb["id"])},
        )
    description = (await _tool(client, org.headers, agent))["tool"]["description"]
    # A failed new version keeps its previous chunks live (issue #3), so it is still a topic.
    assert "Topics covered: Dental FAQ: Price list." in description
    assert "Never indexed" not in description
    assert "Still queued" not in description


def test_a_tool_description_template_too_long_for_openai_stops_start_up(tmp_path):
    folder = tmp_path / "prompts"
    shutil.copytree(PROJECT_PROMPTS, folder)
    (folder / "default" / "tool.description.md").write_text(
        '+++\nversion = "9"\n+++\n' + "x" * 990 + " $knowledge_summary\n"
    )
    with pytest.raises(ValueError, match=r"tool\.description\.md takes 991 of the 1024 characters"):
        check_tool_prompts(PromptLibrary.load(folder))
    check_tool_prompts(PromptLibrary.load(PROJECT_PROMPTS))  # the shipped prompts fit


def test_an_unknown_default_variant_stops_start_up(settings: Settings, database_url):
    configured = settings.model_copy(
        update={"query": settings.query.model_copy(update={"prompt_variant": "concize"})}
    )
    with pytest.raises(ValueError, match="QUERY__PROMPT_VARIANT='concize' is not a prompt variant"):
        create_app(configured, database_url=database_url, resolver=fake_resolver, run_workers=False)


async def test_answer_cache_key_covers_answer_shaping_settings(database_url, settings, org, drain_queue):
    """An answer cached under one word cap is not served by a process with another."""
    first_app = create_app(settings, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=first_app) as c:
        agent = await _faq_agent(c, org, first_app, drain_queue)
        assert (await _ask(c, org.headers, agent, "Where can I park?")).json()["cached"] is False
        assert (await _ask(c, org.headers, agent, "Where can I park?")).json()["cached"] is True
    shorter = settings.model_copy(update={"query": settings.query.model_copy(update={"max_answer_words": 8})})
    second_app = create_app(shorter, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=second_app) as c:
        body = (await _ask(c, org.headers, agent, "Where can I park?")).json()
    assert body["cached"] is False
    assert len(body["answer"].split()) <= 8


async def test_an_unspeakable_model_reply_is_not_found(database_url, settings, org, drain_queue, respx_mock):
    route = respx_mock.post(CHAT).mock(return_value=chat_reply("🎉👍 **"))
    app = create_app(
        llm_settings(settings), database_url=database_url, resolver=fake_resolver, run_workers=False
    )
    async with AsyncTestClient(app=app) as c:
        agent = await _faq_agent(c, org, app, drain_queue)
        body = (await _ask(c, org.headers, agent, "Where can I park?")).json()
    assert route.call_count == 1
    assert "Where can I park?" in route.calls[0].request.content.decode()
    assert (body["status"], body["answer"]) == ("not_found", "I'm sorry, I don't have that information.")


async def test_query_embeddings_are_cached_as_float32_arrays(app, client, org, faq_agent):
    r = await _ask(client, org.headers, faq_agent["agent"], "Where can I park?")
    assert r.json()["status"] == "answered"
    service = app.state.query_service
    vector = service.embed_cache.get((service.embedder.model_key, "where can i park"))
    assert isinstance(vector, array)
    assert (vector.typecode, len(vector)) == ("f", service.embedder.dimensions)


async def test_the_embedding_timeout_leaves_half_the_deadline(settings: Settings, database_url):
    tight = settings.model_copy(update={"query": settings.query.model_copy(update={"deadline_s": 1.0})})
    app = create_app(tight, database_url=database_url, resolver=fake_resolver, run_workers=False)
    async with AsyncTestClient(app=app):
        assert settings.embedding.query_timeout_s == 0.8
        assert app.state.query_service.embed_timeout_s == 0.5
    async with AsyncTestClient(app=create_app(settings, database_url=database_url, run_workers=False)) as c:
        assert c.app.state.query_service.embed_timeout_s == 0.8


async def test_maintenance_prunes_expired_answers(app, client, org, faq_agent, engine):
    for question in ("Where can I park?", "When are you open?"):
        assert (await _ask(client, org.headers, faq_agent["agent"], question)).json()["cached"] is False
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE answer_cache SET expires_at = now() - interval '1 second'"
                " WHERE response->>'answer' LIKE '%parking%'"
            )
        )
    await make_ingestor(app, engine).maintenance()
    async with engine.connect() as conn:
        left = (await conn.execute(text("SELECT response->>'answer' AS answer FROM answer_cache"))).all()
    assert [r.answer for r in left] == ["The practice is open Monday to Friday from 9 AM to 5 PM."]


async def test_topics_read_at_most_a_hundred_documents_per_kb(client, org, engine, sessionmaker):
    kb = await create_kb(client, org.headers, "Handbook")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO documents (id, org_id, kb_id, title, status, source_kind, chunk_count, created_at)"
                " SELECT gen_random_uuid(), :org, :kb, 'Doc ' || i, 'ready', 'text', 1,"
                " now() - make_interval(secs => 1000 - i) FROM generate_series(1, 120) AS i"
            ),
            {"org": org.id, "kb": uuid.UUID(kb["id"])},
        )
    async with sessionmaker() as session:
        topics = await ToolService(session, org.id, PromptLibrary.load(PROJECT_PROMPTS)).topics(
            uuid.UUID(agent)
        )
    assert [d.title for d in topics[0].documents] == [f"Doc {i}" for i in range(1, 101)]


@pytest.mark.parametrize("path", ["tool", "knowledge"])
async def test_agent_reads_are_404_unless_the_agent_is_known_here(client, org, other_org, faq_agent, path):
    agent, kb = faq_agent["agent"], faq_agent["kb"]["id"]
    assert (await client.get(f"/api/agents/{agent}/{path}", headers=org.headers)).status_code == 200
    r = await client.get(f"/api/agents/{agent}/{path}", headers=other_org.headers)
    assert (r.status_code, r.json()["detail"]) == (404, AGENT_NOT_FOUND)
    assert (await client.get(f"/api/agents/{uuid.uuid4()}/{path}", headers=org.headers)).status_code == 404
    # Known, with nothing assigned any more: still answered.
    await client.put(f"/api/knowledge/{kb}/agents", json={"agent_ids": []}, headers=org.headers)
    r = await client.get(f"/api/agents/{agent}/{path}", headers=org.headers)
    assert r.status_code == 200
    if path == "knowledge":
        assert r.json() == []
    else:
        assert "no topics yet" in r.json()["instructions"]


async def test_renaming_a_document_invalidates_cached_answers(client, org, faq_agent):
    agent, kb, doc = faq_agent["agent"], faq_agent["kb"]["id"], faq_agent["doc"]["id"]
    first = (await _ask(client, org.headers, agent, "Where can I park?")).json()
    assert (first["cached"], first["sources"][0]["title"]) == (False, "Practice FAQ")
    assert (await _ask(client, org.headers, agent, "Where can I park?")).json()["cached"] is True
    r = await client.put(
        f"/api/knowledge/{kb}/documents/{doc}", json={"title": "Visitor guide"}, headers=org.headers
    )
    assert r.status_code == 200
    after = (await _ask(client, org.headers, agent, "Where can I park?")).json()
    assert (after["cached"], after["sources"][0]["title"]) == (False, "Visitor guide")


async def test_a_variant_taken_out_of_prompts_falls_back_to_the_configured_default_and_is_warned(
    warm_app, org, drain_queue, engine
):
    # Set while it existed, the variant has since left prompts/: calls must still be answered,
    # with what the operator configured (not the built-in "default"), and the admin told.
    app = warm_app(prompt_variant="warm")
    async with AsyncTestClient(app=app) as c:
        agent = await _faq_agent(c, org, app, drain_queue)
        await store_removed_variant(engine, agent)
        tool = await _tool(c, org.headers, agent)
        settings = (await c.get(f"/api/agents/{agent}/settings", headers=org.headers)).json()
        asked = await c.post(
            f"/api/agents/{agent}/query_knowledge", json={"query": "Where can I park?"}, headers=org.headers
        )
        played = await c.post(
            f"/api/agents/{agent}/playground", json={"query": "Where can I park?"}, headers=org.headers
        )
    assert tool["tool"]["description"].startswith("Warmly looks up what callers ask about")
    assert settings["prompt_variant"] == "retired"
    assert settings["warnings"] == [
        "the prompt variant 'retired' is no longer in prompts/: the agent is answered with 'warm' until its "
        "variant is set again"
    ]
    assert asked.status_code == 200, asked.text
    assert asked.json()["status"] == "answered"
    (run,) = played.json()["runs"]
    assert (run["variant"], run["prompt_version"].startswith("warm:")) == ("warm", True)


async def test_the_tool_is_declared_in_a_variant_asked_for_by_an_admin(warm_app, org, drain_queue):
    app = warm_app()
    async with AsyncTestClient(app=app) as c:
        agent = await _faq_agent(c, org, app, drain_queue)
        r = await c.get(f"/api/agents/{agent}/tool", params={"variant": "warm"}, headers=org.headers)
        unknown = await c.get(f"/api/agents/{agent}/tool", params={"variant": "nope"}, headers=org.headers)
        key = await create_key(c, org.headers, role="query")
        refused = await c.get(
            f"/api/agents/{agent}/tool", params={"variant": "warm"}, headers=bearer(key["key"])
        )
        own = await c.get(f"/api/agents/{agent}/tool", headers=bearer(key["key"]))
    assert r.status_code == 200, r.text
    assert (
        r.json()["tool"]["description"] == "Warmly looks up what callers ask about: Dental FAQ: Practice FAQ."
    )
    assert r.json()["prompt_version"].startswith("warm:")
    assert (unknown.status_code, unknown.json()["fields"]) == (
        422,
        [{"field": "variant", "message": "one of: default, concise, warm"}],
    )
    assert (refused.status_code, refused.json()["detail"]) == (403, "prompt variants need an 'admin' key")
    assert own.json()["tool"]["description"].startswith("Looks up the answer to a caller's question")
