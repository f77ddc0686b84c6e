"""Escalation: the reply's `action`, the transfer line and its reason, by the agent's policy."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from app.prompting import PromptLibrary

PROMPTS = PromptLibrary.load(Path(__file__).resolve().parents[2] / "prompts")
NOT_FOUND_LINE = "I'm sorry, I don't have that information."
TRANSFER_LINE = PROMPTS.get("default").transfer_reply
UNKNOWN = "What is the capital of Mongolia?"
ANSWERABLE = "Is there free parking?"


async def _policy(client: Any, org: Any, agent: str, on_not_found: str, topics: list[str]) -> None:
    r = await client.put(
        f"/api/agents/{agent}/settings",
        json={"prompt_variant": None, "escalation": {"on_not_found": on_not_found, "topics": topics}},
        headers=org.headers,
    )
    assert r.status_code == 200


async def _ask(client: Any, org: Any, agent: str, query: str, *, debug: bool = False) -> dict[str, Any]:
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge",
        json={"query": query},
        params={"debug": "true"} if debug else None,
        headers=org.headers,
    )
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


async def _logged(client: Any, org: Any, agent: str) -> list[tuple[str, str, str | None, str]]:
    r = await client.get(f"/api/agents/{agent}/queries", headers=org.headers)
    return [(q["status"], q["action"], q["transfer_reason"], q["answer"]) for q in r.json()["items"]]


def test_the_transfer_line_is_the_prompt_file():
    assert (
        TRANSFER_LINE == "Let me put you through to a colleague who can help you with that. Please hold on."
    )


async def test_not_found_with_say_is_the_not_found_line(client, org, faq_agent):
    agent = faq_agent["agent"]
    body = await _ask(client, org, agent, UNKNOWN)
    assert (body["status"], body["answer"], body["sources"]) == ("not_found", NOT_FOUND_LINE, [])
    assert (body["action"], body["transfer_reason"]) == ("say_not_found", None)
    body = await _ask(client, org, agent, ANSWERABLE)
    assert (body["status"], body["action"], body["transfer_reason"]) == ("answered", "answer", None)
    assert await _logged(client, org, agent) == [
        ("answered", "answer", None, body["answer"]),
        ("not_found", "say_not_found", None, NOT_FOUND_LINE),
    ]


async def test_not_found_with_transfer_hands_over(client, org, faq_agent):
    agent = faq_agent["agent"]
    await _policy(client, org, agent, "transfer", [])
    body = await _ask(client, org, agent, UNKNOWN, debug=True)
    assert (body["status"], body["answer"], body["sources"]) == ("not_found", TRANSFER_LINE, [])
    assert (body["action"], body["transfer_reason"]) == ("transfer", "not_found")
    escalation = body["debug"]["escalation"]
    assert (escalation["on_not_found"], escalation["topics"], escalation["matched_topic"]) == (
        "transfer",
        [],
        None,
    )
    assert escalation["knowledge_reply"]["answer"] == NOT_FOUND_LINE
    # What it knows it still answers.
    body = await _ask(client, org, agent, ANSWERABLE)
    assert (body["status"], body["action"], body["transfer_reason"]) == ("answered", "answer", None)
    assert (await _logged(client, org, agent))[1] == ("not_found", "transfer", "not_found", TRANSFER_LINE)


async def test_a_topic_transfers_an_answerable_question(client, org, faq_agent):
    agent = faq_agent["agent"]
    first = await _ask(client, org, agent, ANSWERABLE)
    assert (first["status"], first["action"], first["cached"]) == ("answered", "answer", False)
    await _policy(client, org, agent, "say", ["cancel my contract", "Free parking"])
    # The answer cache keeps the knowledge's answer: the policy applies on top of it at once.
    body = await _ask(client, org, agent, ANSWERABLE)
    assert (body["status"], body["answer"], body["sources"], body["cached"]) == (
        "answered",
        TRANSFER_LINE,
        [],
        True,
    )
    assert (body["action"], body["transfer_reason"]) == ("transfer", "topic:free parking")
    body = await _ask(client, org, agent, "Is there FREE-parking, please?", debug=True)
    assert (body["action"], body["transfer_reason"]) == ("transfer", "topic:free parking")
    assert body["debug"]["escalation"]["matched_topic"] == "free parking"
    assert body["debug"]["escalation"]["knowledge_reply"]["status"] == "answered"
    # Words, not letters: "parkingfree" names no topic.
    body = await _ask(client, org, agent, "Is there free parkingfree?", debug=True)
    assert (body["transfer_reason"], body["debug"]["escalation"]["matched_topic"]) == (None, None)
    assert (await _logged(client, org, agent))[1] == (
        "answered",
        "transfer",
        "topic:free parking",
        TRANSFER_LINE,
    )


async def test_another_organisations_agent_is_still_404(client, org, other_org, faq_agent):
    agent = faq_agent["agent"]
    await _policy(client, org, agent, "transfer", ["parking"])
    r = await client.post(
        f"/api/agents/{agent}/query_knowledge", json={"query": ANSWERABLE}, headers=other_org.headers
    )
    assert r.status_code == 404
    assert r.json()["detail"] == "agent not found: no knowledge base of this organisation is assigned to it"
    r = await client.post(
        f"/api/agents/{uuid.uuid4()}/query_knowledge", json={"query": ANSWERABLE}, headers=org.headers
    )
    assert r.status_code == 404
