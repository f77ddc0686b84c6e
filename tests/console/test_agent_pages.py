"""Agent pages: the list with KBs, assigning and unassigning, the settings, the tool
declaration in each format; CSRF on every change; another organisation's ids are 404."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.conftest import Org, make_org
from tests.console.helpers import form, text_of
from tests.helpers import assign_new_agent, create_kb, create_text_doc, store_removed_variant

Client = AsyncTestClient[Litestar]
Browser = tuple[Client, str]


async def api_kbs_of(client: Client, org: Org, agent: str) -> list[str]:
    r = await client.get(f"/api/agents/{agent}/knowledge", headers=org.headers)
    assert r.status_code == 200, r.text
    return sorted(kb["title"] for kb in r.json())


async def test_list_shows_agents_with_their_kbs(signed_in: Browser, client: Client, org: Org) -> None:
    browser, _ = signed_in
    faq = await create_kb(client, org.headers, "FAQ")
    prices = await create_kb(client, org.headers, "Prices")
    agent = await assign_new_agent(client, org.headers, faq["id"])
    lonely = await assign_new_agent(client, org.headers, prices["id"])
    r = await client.put(
        f"/api/knowledge/{prices['id']}/agents", json={"agent_ids": [agent, lonely]}, headers=org.headers
    )
    assert r.status_code == 200
    page = await browser.get("/console/agents")
    assert page.status_code == 200
    row = re.search(
        rf'<tr>\s*<td class="title-cell"><a href="/console/agents/{agent}">.*?</tr>', page.text, re.S
    )
    assert row
    assert re.findall(r'href="/console/knowledge/[^"]+">([^<]+)</a>', row.group(0)) == ["FAQ", "Prices"]
    assert f"/console/agents/{lonely}" in page.text
    assert "1–2 of 2" in text_of(page.text)


async def test_add_an_agent_by_id_assigns_the_kb(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers, "FAQ")
    page = await browser.get("/console/agents/new")
    assert f'<option value="{kb["id"]}">FAQ</option>' in page.text
    agent = str(uuid.uuid4())
    r = await browser.post(
        "/console/agents", data=form(csrf, agent_id=f" {agent} ", kb_id=kb["id"]), follow_redirects=False
    )
    assert (r.status_code, r.headers["location"]) == (303, f"/console/agents/{agent}?done=agent-kb-assigned")
    assert await api_kbs_of(client, org, agent) == ["FAQ"]
    bad = await browser.post("/console/agents", data=form(csrf, agent_id="not-an-id", kb_id=kb["id"]))
    assert bad.status_code == 422
    assert 'id="error-agent_id"' in bad.text


async def test_assign_and_unassign_a_kb(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    faq = await create_kb(client, org.headers, "FAQ")
    prices = await create_kb(client, org.headers, "Prices")
    agent = await assign_new_agent(client, org.headers, faq["id"])
    page = await browser.get(f"/console/agents/{agent}")
    assert page.status_code == 200
    # Only the KBs not yet assigned are offered.
    offered = re.search(r'<select id="field-kb_id".*?</select>', page.text, re.S)
    assert offered
    assert re.findall(r"<option[^>]*>([^<]+)</option>", offered.group(0)) == ["Prices"]
    r = await browser.post(
        f"/console/agents/{agent}/kbs", data=form(csrf, kb_id=prices["id"]), follow_redirects=False
    )
    assert r.status_code == 303
    assert await api_kbs_of(client, org, agent) == ["FAQ", "Prices"]
    none = await browser.post(f"/console/agents/{agent}/kbs", data=form(csrf, kb_id=""))
    assert none.status_code == 422
    assert "choose a knowledge base to assign" in text_of(none.text)
    r = await browser.post(
        f"/console/agents/{agent}/kbs/{faq['id']}/unassign", data=form(csrf), follow_redirects=False
    )
    assert (r.status_code, r.headers["location"]) == (
        303,
        f"/console/agents/{agent}?done=agent-kb-unassigned",
    )
    assert await api_kbs_of(client, org, agent) == ["Prices"]
    # The KB itself is untouched.
    assert (await client.get(f"/api/knowledge/{faq['id']}", headers=org.headers)).status_code == 200
    after = await browser.get(r.headers["location"])
    assert "Knowledge base taken from the agent." in text_of(after.text)
    assert 'data-confirm="Take Prices from this agent?' in after.text


async def test_settings_are_shown_and_saved(signed_in: Browser, client: Client, org: Org) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers, "FAQ")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    page = await browser.get(f"/console/agents/{agent}")
    assert '<option value="" selected>The default</option>' in page.text
    assert '<option value="concise">concise</option>' in page.text
    r = await browser.post(
        f"/console/agents/{agent}/settings",
        data=form(
            csrf,
            prompt_variant="concise",
            on_not_found="transfer",
            topics="Complaint\n\n  billing dispute \n",
        ),
        follow_redirects=False,
    )
    assert (r.status_code, r.headers["location"]) == (303, f"/console/agents/{agent}?done=agent-saved")
    settings = (await client.get(f"/api/agents/{agent}/settings", headers=org.headers)).json()
    assert settings["prompt_variant"] == "concise"
    assert settings["escalation"] == {"on_not_found": "transfer", "topics": ["complaint", "billing dispute"]}
    page = await browser.get(r.headers["location"])
    assert '<option value="concise" selected>concise</option>' in page.text
    assert '<option value="transfer" selected>' in page.text
    assert "complaint\nbilling dispute</textarea>" in page.text


async def test_bad_settings_are_refused_and_nothing_changes(
    signed_in: Browser, client: Client, org: Org
) -> None:
    browser, csrf = signed_in
    kb = await create_kb(client, org.headers, "FAQ")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    r = await browser.post(
        f"/console/agents/{agent}/settings",
        data=form(csrf, prompt_variant="", on_not_found="say", topics="!!!"),
    )
    assert r.status_code == 422
    assert 'id="error-topics"' in r.text
    assert "!!!</textarea>" in r.text
    r = await browser.post(
        f"/console/agents/{agent}/settings",
        data=form(csrf, prompt_variant="nope", on_not_found="say", topics=""),
    )
    assert r.status_code == 422
    assert 'id="error-prompt_variant"' in r.text
    settings = (await client.get(f"/api/agents/{agent}/settings", headers=org.headers)).json()
    assert (settings["prompt_variant"], settings["escalation"]["topics"]) == (None, [])


async def test_tool_declaration_in_each_format(
    signed_in: Browser, client: Client, org: Org, drain_queue: Any
) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers, "Dental FAQ")
    await create_text_doc(client, org.headers, kb["id"], title="Opening hours", content="We open at nine.")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    await drain_queue()
    page = await browser.get(f"/console/agents/{agent}")
    for fmt in ("openai-realtime", "openai-chat", "gemini"):
        api = (
            await client.get(f"/api/agents/{agent}/tool", params={"format": fmt}, headers=org.headers)
        ).json()
        shown = re.search(rf'<pre class="code" id="tool-{fmt}">(.*?)</pre>', page.text, re.S)
        assert shown, fmt
        assert json.loads(_unescape(shown.group(1))) == api["tool"]
        assert f'data-copy="tool-{fmt}"' in page.text
    instructions = re.search(r'<pre class="code" id="tool-instructions">(.*?)</pre>', page.text, re.S)
    assert instructions
    assert _unescape(instructions.group(1)) == api["instructions"]
    assert "Not available yet" not in page.text


async def test_changes_need_the_csrf_token(signed_in: Browser, client: Client, org: Org) -> None:
    browser, _ = signed_in
    faq = await create_kb(client, org.headers, "FAQ")
    prices = await create_kb(client, org.headers, "Prices")
    agent = await assign_new_agent(client, org.headers, faq["id"])
    results = [
        await browser.post(
            f"/console/agents/{agent}/settings", data={"prompt_variant": "concise", "on_not_found": "say"}
        ),
        await browser.post(f"/console/agents/{agent}/kbs", data={"kb_id": prices["id"]}),
        await browser.post(f"/console/agents/{agent}/kbs/{faq['id']}/unassign", data={"csrf_token": "x"}),
        await browser.post("/console/agents", data={"agent_id": str(uuid.uuid4()), "kb_id": prices["id"]}),
    ]
    assert [r.status_code for r in results] == [403, 403, 403, 403]
    assert await api_kbs_of(client, org, agent) == ["FAQ"]
    assert (await client.get(f"/api/agents/{agent}/settings", headers=org.headers)).json()[
        "prompt_variant"
    ] is None


async def test_another_organisations_agent_and_kb_are_not_found(
    signed_in: Browser, client: Client, org: Org, sessionmaker: Any
) -> None:
    browser, csrf = signed_in
    other = await make_org(sessionmaker, "Other")
    theirs_kb = await create_kb(client, other.headers, "Their FAQ")
    theirs = await assign_new_agent(client, other.headers, theirs_kb["id"])
    mine_kb = await create_kb(client, org.headers, "FAQ")
    mine = await assign_new_agent(client, org.headers, mine_kb["id"])
    assert (await browser.get(f"/console/agents/{theirs}")).status_code == 404
    responses = [
        await browser.post(
            f"/console/agents/{theirs}/settings",
            data=form(csrf, prompt_variant="concise", on_not_found="say"),
        ),
        await browser.post(f"/console/agents/{theirs}/kbs", data=form(csrf, kb_id=mine_kb["id"])),
        await browser.post(f"/console/agents/{mine}/kbs", data=form(csrf, kb_id=theirs_kb["id"])),
        await browser.post(f"/console/agents/{theirs}/kbs/{theirs_kb['id']}/unassign", data=form(csrf)),
        await browser.post(
            "/console/agents", data=form(csrf, agent_id=str(uuid.uuid4()), kb_id=theirs_kb["id"])
        ),
    ]
    assert [r.status_code for r in responses] == [404, 404, 404, 404, 404]
    assert await api_kbs_of(client, other, theirs) == ["Their FAQ"]
    assert await api_kbs_of(client, org, mine) == ["FAQ"]
    assert (await client.get(f"/api/agents/{theirs}/settings", headers=other.headers)).json()[
        "prompt_variant"
    ] is None
    listing = await browser.get("/console/agents")
    assert theirs not in listing.text


async def test_kb_titles_with_markup_are_text(signed_in: Browser, client: Client, org: Org) -> None:
    browser, _ = signed_in
    kb = await create_kb(client, org.headers, "<script>alert(1)</script>")
    agent = await assign_new_agent(client, org.headers, kb["id"])
    for path in ("/console/agents", f"/console/agents/{agent}"):
        page = await browser.get(path)
        assert "<script>alert(1)</script>" not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def _unescape(value: str) -> str:
    import html

    return html.unescape(value)


@pytest.fixture
async def agent(client: Client, org: Org) -> str:
    kb = await create_kb(client, org.headers, "FAQ")
    return await assign_new_agent(client, org.headers, kb["id"])


async def test_a_variant_taken_out_of_prompts_is_shown_as_a_warning(
    signed_in: Browser, agent: str, engine: Any
) -> None:
    browser, _ = signed_in
    page = await browser.get(f"/console/agents/{agent}")
    assert 'class="reason warning"' not in page.text
    await store_removed_variant(engine, agent)
    page = await browser.get(f"/console/agents/{agent}")
    assert page.status_code == 200
    assert (
        "The prompt variant 'retired' is no longer in prompts/: the agent is answered with 'default' until "
        "its variant is set again."
    ) in _unescape(text_of(page.text))


async def test_saving_other_settings_keeps_a_variant_taken_out_of_prompts(
    signed_in: Browser, client: Client, org: Org, agent: str, engine: Any
) -> None:
    browser, csrf = signed_in
    await store_removed_variant(engine, agent)
    page = await browser.get(f"/console/agents/{agent}")
    assert '<option value="retired" selected>retired (no longer in prompts/)</option>' in page.text
    r = await browser.post(
        f"/console/agents/{agent}/settings",
        data=form(csrf, prompt_variant="retired", on_not_found="transfer", topics="billing"),
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    settings = (await client.get(f"/api/agents/{agent}/settings", headers=org.headers)).json()
    assert (settings["prompt_variant"], settings["escalation"]["on_not_found"]) == ("retired", "transfer")
    # Kept as it was, never newly chosen: another variant missing from prompts/ is refused.
    r = await client.put(
        f"/api/agents/{agent}/settings", json={"prompt_variant": "gone"}, headers=org.headers
    )
    assert r.status_code == 422
