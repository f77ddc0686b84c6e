"""GET /api/agents/{agent_id}/tool and the per-agent prompt variant."""

import uuid

import pytest
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.realtime import RealtimeFunctionToolParam

from app.query.tool_declaration import tool_definition
from tests.helpers import bearer, create_key
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
        fmt, description=description, query_description=prompt.query_parameter_description
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
