"""GET /api/agents/{agent_id}/tool and the per-agent prompt variant."""

import uuid

import pytest
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.realtime import RealtimeFunctionToolParam
from sqlalchemy import text

from app.query.tool_declaration import tool_definition
from tests.helpers import assign_new_agent, bearer, create_kb, create_key, create_text_doc
from tests.query.test_tool_declaration import strict_validator


@pytest.mark.parametrize("fmt", ["openai-realtime", "openai-chat", "gemini"])
async def test_tool_names_the_agents_topics(client, app, org, faq_agent, fmt):
    r = await client.get(
        f"/api/agents/{faq_agent['agent']}/tool", params={"format": fmt}, headers=org.headers
    )
    assert r.status_code == 200
    body = r.json()
    assert body["format"] == fmt
    tool = body["tool"]
    prompt = app.state.prompts.get("default")
    if fmt == "gemini":
        description = tool["functionDeclarations"][0]["description"]
    elif fmt == "openai-chat":
        # Strict: a missing or misspelt key fails, unlike the SDK's lenient TypedDict.
        assert strict_validator(ChatCompletionFunctionToolParam).validate_python(tool) == tool
        description = tool["function"]["description"]
    else:
        assert strict_validator(RealtimeFunctionToolParam).validate_python(tool) == tool
        description = tool["description"]
    assert tool == tool_definition(
        fmt,
        description=description,
        query_description=prompt.query_parameter_description,
        history_description=prompt.history_parameter_description,
    )
    assert description == prompt.tool_description(
        knowledge_summary="Dental FAQ (Practice information): Practice FAQ"
    )
    assert "Dental FAQ" in body["instructions"]
    assert "query_knowledge" in body["instructions"]


async def test_query_key_may_read_the_tool(client, org, faq_agent):
    key = await create_key(client, org.headers, "query")
    r = await client.get(f"/api/agents/{faq_agent['agent']}/tool", headers=bearer(key["key"]))
    assert r.status_code == 200


@pytest.mark.parametrize("fmt", ["claude", "gemini-live"])
async def test_unknown_format_is_400_naming_the_formats(client, org, faq_agent, fmt):
    r = await client.get(
        f"/api/agents/{faq_agent['agent']}/tool", params={"format": fmt}, headers=org.headers
    )
    assert (r.status_code, r.json()) == (
        400,
        {
            "error": "bad_request",
            "detail": "invalid parameters: format",
            "fields": [
                {
                    "field": "format",
                    "message": f"Invalid enum value '{fmt}'; expected one of: openai-realtime, openai-chat, gemini",
                }
            ],
        },
    )


async def test_agent_prompt_variant_is_used_and_logged(client, org, faq_agent):
    agent = faq_agent["agent"]
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.json() == {
        "agent_id": agent,
        "prompt_variant": None,
        "available_variants": ["default", "concise"],
        "escalation": {"on_not_found": "say", "topics": []},
        "attribution": "off",
        "filters": None,
        "warnings": [],
    }
    r = await client.put(
        f"/api/agents/{agent}/settings", json={"prompt_variant": "concise"}, headers=org.headers
    )
    assert r.status_code == 200
    assert r.json()["prompt_variant"] == "concise"
    await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": "Where can I park?"}, headers=org.headers
    )
    logged = (await client.get(f"/api/agents/{agent}/queries", headers=org.headers)).json()["items"][0]
    assert logged["prompt_variant"] == "concise"
    assert logged["prompt_version"].startswith("concise:grounding.system=concise-")


async def test_unknown_variant_is_422(client, org, faq_agent):
    r = await client.put(
        f"/api/agents/{faq_agent['agent']}/settings", json={"prompt_variant": "nope"}, headers=org.headers
    )
    assert r.status_code == 422
    r = await client.post(
        f"/api/agents/{faq_agent['agent']}/query_knowledge",
        json={"query": "x", "variant": "nope"},
        headers=org.headers,
    )
    assert r.status_code == 422


async def test_settings_of_unknown_or_foreign_agent_is_404(client, org, other_org, faq_agent):
    assert (await client.get(f"/api/agents/{uuid.uuid4()}/settings", headers=org.headers)).status_code == 404
    r = await client.put(
        f"/api/agents/{faq_agent['agent']}/settings",
        json={"prompt_variant": "concise"},
        headers=other_org.headers,
    )
    assert r.status_code == 404


async def _declaration(client, headers, agent) -> dict:
    r = await client.get(f"/api/agents/{agent}/tool", headers=headers)
    assert r.status_code == 200, r.text
    body: dict = r.json()
    return body


async def test_tool_with_a_ready_document_is_available(client, org, faq_agent):
    body = await _declaration(client, org.headers, faq_agent["agent"])
    assert (body["available"], body["reason"]) == (True, None)


async def test_tool_of_an_agent_with_no_kb_assigned_any_more_is_unavailable(client, org, faq_agent):
    kb = faq_agent["kb"]["id"]
    r = await client.put(f"/api/knowledge/{kb}/agents", json={"agent_ids": []}, headers=org.headers)
    assert r.status_code == 200
    body = await _declaration(client, org.headers, faq_agent["agent"])
    assert (body["available"], body["reason"]) == (False, "no_knowledge_base")
    # The declaration stays, so a runtime that does not read `available` keeps working.
    assert body["tool"]["name"] == "query_knowledge"
    assert "query_knowledge" in body["instructions"]


async def test_tool_over_kbs_without_documents_is_unavailable(client, org):
    kb = await create_kb(client, org.headers, "Empty")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    body = await _declaration(client, org.headers, agent)
    assert (body["available"], body["reason"]) == (False, "no_documents")


@pytest.mark.parametrize("status", ["pending", "processing", "failed"])
async def test_tool_whose_documents_are_not_ready_is_unavailable(client, org, engine, status):
    kb = await create_kb(client, org.headers, "Handbook")
    await create_text_doc(client, org.headers, kb["id"])  # pending: no worker runs here
    agent = await assign_new_agent(client, org.headers, kb["id"])
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE documents SET status = :status"), {"status": status})
    body = await _declaration(client, org.headers, agent)
    assert (body["available"], body["reason"]) == (False, "no_ready_documents")


async def test_tool_is_available_when_any_assigned_kb_has_a_ready_document(client, org, faq_agent):
    agent = faq_agent["agent"]
    empty = await create_kb(client, org.headers, "Empty")
    r = await client.put(
        f"/api/knowledge/{empty['id']}/agents", json={"agent_ids": [agent]}, headers=org.headers
    )
    assert r.status_code == 200
    body = await _declaration(client, org.headers, agent)
    assert (body["available"], body["reason"]) == (True, None)
    # Its only ready document deleted, the agent's tool cannot answer any more.
    doc = faq_agent["doc"]
    r = await client.delete(
        f"/api/knowledge/{faq_agent['kb']['id']}/documents/{doc['id']}", headers=org.headers
    )
    assert r.status_code == 204, r.text
    body = await _declaration(client, org.headers, agent)
    assert (body["available"], body["reason"]) == (False, "no_documents")
