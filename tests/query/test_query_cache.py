"""The answer cache (app/query/service.py, AGENT_CONTEXT_SQL in app/query/repository.py):
every change to what an agent may answer from, or how it answers, is heard at once.

Each case asks a question until the answer comes from the cache, makes one change, and
asks again: the answer is computed afresh (cached False) and shows the change."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers import create_kb, create_text_doc
from tests.query.conftest import FAQ

QUESTION = "Where can I park?"
FAQ_PARKING = "Free parking is available behind the building, entrance on Elm Street."
GARAGE = "# Parking\nParking is also possible in the garage on Oak Road."
NOT_FOUND = "I'm sorry, I don't have that information."


@dataclass
class Agent:
    """An agent reading two KBs: the FAQ (with its parking answer) and a team page."""

    id: str
    faq_kb: dict[str, Any]
    faq_doc: dict[str, Any]
    team_kb: dict[str, Any]
    team_doc: dict[str, Any]


@pytest.fixture
async def agent(client, org, drain_queue) -> Agent:
    faq_kb = await create_kb(client, org.headers, "Dental FAQ")
    faq_doc = await create_text_doc(
        client, org.headers, faq_kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    team_kb = await create_kb(client, org.headers, "Team")
    team_doc = await create_text_doc(
        client,
        org.headers,
        team_kb["id"],
        title="Our team",
        content="# Team\nDoctor Smith has treated patients here since 2005.",
        content_type="markdown",
    )
    agent_id = str(uuid.uuid4())
    for kb in (faq_kb, team_kb):
        r = await client.put(
            f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [agent_id]}, headers=org.headers
        )
        assert r.status_code == 200, r.text
    assert await drain_queue() == {"ready": 2}
    return Agent(agent_id, faq_kb, faq_doc, team_kb, team_doc)


async def ask(client, org, agent: Agent) -> dict[str, Any]:
    r = await client.post(
        f"/api/agents/{agent.id}/query_knowledge", json={"query": QUESTION}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def document_ids(body: dict[str, Any]) -> set[str]:
    return {s["document_id"] for s in body["sources"]}


# --- the changes and what the next answer must show ------------------------------------------
# Each change returns the id of a document it created, when it created one.


async def add_document(client, org, agent: Agent, drain_queue) -> str | None:
    doc = await create_text_doc(
        client, org.headers, agent.faq_kb["id"], title="Garage", content=GARAGE, content_type="markdown"
    )
    assert await drain_queue() == {"ready": 1}
    return str(doc["id"])


async def delete_document(client, org, agent: Agent, drain_queue) -> str | None:
    r = await client.delete(
        f"/api/knowledge/{agent.faq_kb['id']}/documents/{agent.faq_doc['id']}", headers=org.headers
    )
    assert r.status_code == 204, r.text
    return None


async def delete_kb(client, org, agent: Agent, drain_queue) -> str | None:
    r = await client.delete(f"/api/knowledge/{agent.faq_kb['id']}", headers=org.headers)
    assert r.status_code == 204, r.text
    return None


async def assign_another_kb(client, org, agent: Agent, drain_queue) -> str | None:
    kb = await create_kb(client, org.headers, "Getting here")
    doc = await create_text_doc(
        client, org.headers, kb["id"], title="Garage", content=GARAGE, content_type="markdown"
    )
    assert await drain_queue() == {"ready": 1}
    r = await client.put(
        f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": [agent.id]}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    return str(doc["id"])


async def unassign_kb(client, org, agent: Agent, drain_queue) -> str | None:
    r = await client.put(
        f"/api/knowledge/{agent.faq_kb['id']}/agents", json={"agent_ids": []}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    return None


async def unassign_every_kb(client, org, agent: Agent, drain_queue) -> str | None:
    for kb in (agent.faq_kb, agent.team_kb):
        r = await client.put(f"/api/knowledge/{kb['id']}/agents", json={"agent_ids": []}, headers=org.headers)
        assert r.status_code == 200, r.text
    return None


async def switch_prompt_variant(client, org, agent: Agent, drain_queue) -> str | None:
    r = await client.put(
        f"/api/agents/{agent.id}/settings", json={"prompt_variant": "concise"}, headers=org.headers
    )
    assert r.status_code == 200, r.text
    return None


async def rename_document(client, org, agent: Agent, drain_queue) -> str | None:
    r = await client.put(
        f"/api/knowledge/{agent.faq_kb['id']}/documents/{agent.faq_doc['id']}",
        json={"title": "Visiting us"},
        headers=org.headers,
    )
    assert r.status_code == 200, r.text
    return None


def shows_the_new_document(agent: Agent, body: dict[str, Any], new_doc: str | None) -> None:
    assert body["status"] == "answered"
    assert new_doc in document_ids(body)


def shows_the_faq_is_gone(agent: Agent, body: dict[str, Any], new_doc: str | None) -> None:
    # The team page is still searched; it knows nothing about parking.
    assert (body["status"], body["answer"]) == ("not_found", NOT_FOUND)
    assert document_ids(body) <= {agent.team_doc["id"]}


def shows_nothing_is_assigned(agent: Agent, body: dict[str, Any], new_doc: str | None) -> None:
    # A known agent with no KB left is told "not found" aloud (not a 404).
    assert (body["status"], body["answer"], body["sources"]) == ("not_found", NOT_FOUND, [])


def shows_the_same_answer(agent: Agent, body: dict[str, Any], new_doc: str | None) -> None:
    # The offline answerer says the same in every variant; the log shows which one answered.
    assert (body["status"], body["answer"]) == ("answered", FAQ_PARKING)


def shows_the_new_title(agent: Agent, body: dict[str, Any], new_doc: str | None) -> None:
    assert (body["status"], body["answer"]) == ("answered", FAQ_PARKING)
    assert body["sources"][0]["document_id"] == agent.faq_doc["id"]
    assert body["sources"][0]["title"] == "Visiting us"


@pytest.mark.parametrize(
    ("change", "check"),
    [
        pytest.param(add_document, shows_the_new_document, id="add-document"),
        pytest.param(delete_document, shows_the_faq_is_gone, id="delete-document"),
        pytest.param(delete_kb, shows_the_faq_is_gone, id="delete-kb"),
        pytest.param(assign_another_kb, shows_the_new_document, id="assign-another-kb"),
        pytest.param(unassign_kb, shows_the_faq_is_gone, id="unassign-kb"),
        pytest.param(unassign_every_kb, shows_nothing_is_assigned, id="unassign-every-kb"),
        pytest.param(switch_prompt_variant, shows_the_same_answer, id="switch-prompt-variant"),
        # Answers name their sources by title (fixed in 7a79704: a rename bumps the KB's
        # content version; before, the cached answer kept the old title until it expired).
        pytest.param(rename_document, shows_the_new_title, id="rename-document"),
    ],
)
async def test_a_change_is_heard_at_once(client, org, agent, drain_queue, change, check):
    first = await ask(client, org, agent)
    hit = await ask(client, org, agent)
    assert (first["status"], first["answer"], first["cached"]) == ("answered", FAQ_PARKING, False)
    assert (hit["answer"], hit["cached"]) == (FAQ_PARKING, True)
    assert document_ids(first) >= {agent.faq_doc["id"]}
    new_doc = await change(client, org, agent, drain_queue)
    after = await ask(client, org, agent)
    assert after["cached"] is False
    check(agent, after, new_doc)


async def test_the_variant_that_answered_is_logged_after_a_switch(client, org, agent):
    """The cached answer of one variant is not replayed for another: the log shows the
    switch (the offline answer itself does not change with the variant)."""
    await ask(client, org, agent)
    await switch_prompt_variant(client, org, agent, None)
    await ask(client, org, agent)
    logged = (await client.get(f"/api/agents/{agent.id}/queries", headers=org.headers)).json()["items"]
    assert [(q["prompt_variant"], q["cached"]) for q in logged] == [("concise", False), ("default", False)]
