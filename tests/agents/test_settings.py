"""Per-agent settings: the escalation policy, its validation and its organisation scoping."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import assign_new_agent, create_kb

SAY = {"on_not_found": "say", "topics": []}


@pytest.fixture
async def agent(client: Any, org: Any) -> str:
    kb = await create_kb(client, org.headers, "Dental FAQ")
    return await assign_new_agent(client, org.headers, kb["id"])


async def _put(client: Any, headers: dict[str, str], agent: str, body: dict[str, Any]) -> Any:
    return await client.put(f"/api/agents/{agent}/settings", json=body, headers=headers)


async def test_an_agent_says_not_found_until_told_otherwise(client, org, agent):
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.status_code == 200
    assert r.json()["escalation"] == SAY


async def test_topics_are_stored_as_matched_and_kept_when_left_out(client, org, agent):
    policy = {"on_not_found": "transfer", "topics": ["  Cancel my  CONTRACT! ", "Complaint", "complaint?"]}
    r = await _put(client, org.headers, agent, {"prompt_variant": None, "escalation": policy})
    assert r.status_code == 200
    stored = {"on_not_found": "transfer", "topics": ["cancel my contract", "complaint"]}
    assert r.json()["escalation"] == stored
    # A client that only changes the variant leaves the policy alone.
    r = await _put(client, org.headers, agent, {"prompt_variant": "concise"})
    assert (r.status_code, r.json()["prompt_variant"], r.json()["escalation"]) == (200, "concise", stored)
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.json()["escalation"] == stored
    # Sent again, the policy is replaced as a whole (on_not_found defaults to say).
    r = await _put(client, org.headers, agent, {"prompt_variant": None, "escalation": {}})
    assert r.json()["escalation"] == SAY


@pytest.mark.parametrize(
    ("escalation", "detail", "fields"),
    [
        (
            {"topics": [f"topic {n}" for n in range(21)]},
            "invalid request body: escalation.topics",
            [
                {
                    "field": "escalation.topics",
                    "message": "List should have at most 20 items after validation, not 21",
                }
            ],
        ),
        (
            {"topics": ["x" * 101]},
            "invalid request body: escalation.topics.0",
            [{"field": "escalation.topics.0", "message": "String should have at most 100 characters"}],
        ),
        (
            {"topics": ["   "]},
            "invalid request body: escalation.topics.0",
            [{"field": "escalation.topics.0", "message": "must not be empty or only whitespace"}],
        ),
        (
            {"on_not_found": "hang_up"},
            "invalid request body: escalation.on_not_found",
            [{"field": "escalation.on_not_found", "message": "Input should be 'say' or 'transfer'"}],
        ),
        (
            {"topics": ["complaint", "?!"]},
            "invalid request body: escalation.topics.1",
            [{"field": "escalation.topics.1", "message": "a topic needs a letter or a digit"}],
        ),
    ],
)
async def test_a_bad_policy_is_422_and_changes_nothing(client, org, agent, escalation, detail, fields):
    r = await _put(client, org.headers, agent, {"prompt_variant": "concise", "escalation": escalation})
    assert r.status_code == 422
    assert r.json() == {"error": "validation_error", "detail": detail, "fields": fields}
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert (r.json()["prompt_variant"], r.json()["escalation"]) == (None, SAY)


async def test_another_organisations_agent_is_404(client, org, other_org, agent):
    policy = {"prompt_variant": None, "escalation": {"on_not_found": "transfer", "topics": []}}
    r = await _put(client, other_org.headers, agent, policy)
    assert r.status_code == 404
    assert r.json()["detail"] == "agent not found: no knowledge base of this organisation is assigned to it"
    r = await client.get(f"/api/agents/{agent}/settings", headers=org.headers)
    assert r.json()["escalation"] == SAY
