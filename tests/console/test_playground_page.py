"""The playground page: an agent, a question, one or two prompt variants; the results as a
whole page (no JavaScript) or as a fragment htmx swaps in; a dry run (no log row); CSRF;
another organisation's agent is 404; a question is shown as text."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from tests.conftest import Org, make_org
from tests.console.conftest import OpenBrowser
from tests.console.helpers import form, sign_in, text_of
from tests.helpers import assign_new_agent, create_kb, create_text_doc
from tests.query.conftest import FAQ, OPENAI_BASE, chat_reply, llm_settings

Client = AsyncTestClient[Litestar]
Browser = tuple[Client, str]
CHAT = f"{OPENAI_BASE}/chat/completions"
PARKING = "Free parking is available behind the building, entrance on Elm Street."


@pytest.fixture
async def agent(client: Client, org: Org, drain_queue: Any) -> str:
    kb = await create_kb(client, org.headers, "Dental FAQ")
    await create_text_doc(
        client, org.headers, kb["id"], title="Practice FAQ", content=FAQ, content_type="markdown"
    )
    agent = await assign_new_agent(client, org.headers, kb["id"])
    assert await drain_queue() == {"ready": 1}
    return agent


async def logged(engine: Any) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM query_log"))).scalar_one())


def play(csrf: str, agent: str, query: str, **fields: str) -> dict[str, str]:
    return form(csrf, **{"agent_id": agent, "query": query, "variant": "", "compare_variant": "", **fields})


def pre(page: str, element_id: str) -> str:
    found = re.search(rf'<pre class="code" id="{element_id}">(.*?)</pre>', page, re.S)
    assert found, element_id
    return html.unescape(found.group(1))


async def test_the_form_offers_agents_and_variants(signed_in: Browser, agent: str) -> None:
    browser, _ = signed_in
    page = await browser.get("/console/playground", params={"agent_id": agent})
    assert page.status_code == 200
    assert f'<option value="{agent}" selected>' in page.text
    for control in ("agent_id", "query", "variant", "compare_variant", "skip_model"):
        assert f'<label for="field-{control}">' in page.text
    assert '<option value="concise">concise</option>' in page.text
    assert 'hx-post="/console/playground"' in page.text
    assert 'method="post" action="/console/playground"' in page.text


async def test_a_plain_post_shows_the_whole_page_with_results_and_logs_nothing(
    signed_in: Browser, agent: str, engine: Any
) -> None:
    browser, csrf = signed_in
    r = await browser.post("/console/playground", data=play(csrf, agent, "Where can I park?"))
    assert r.status_code == 200, r.text
    assert "<html" in r.text
    shown = text_of(r.text)
    assert PARKING in shown
    assert "Variant default" in shown
    for heading in (
        "Fused list",
        "BM25 candidates",
        "Vector candidates",
        "Messages for the model",
        "Timings (ms)",
    ):
        assert heading in shown
    assert "Parking" in shown
    # The messages a model would be sent (none is set up here), with copy buttons.
    user = pre(r.text, "run-1-message-2")
    assert "Where can I park?" in user
    assert PARKING in user
    assert 'data-copy="run-1-message-1"' in r.text
    # The question is kept in the form.
    assert "Where can I park?</textarea>" in r.text
    assert await logged(engine) == 0


async def test_htmx_gets_the_results_fragment(signed_in: Browser, agent: str, engine: Any) -> None:
    browser, csrf = signed_in
    r = await browser.post(
        "/console/playground",
        data=play(csrf, agent, "Where can I park?", compare_variant="concise"),
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200
    assert "<html" not in r.text
    assert "<form" not in r.text
    shown = text_of(r.text)
    assert "Variant default" in shown
    assert "Variant concise" in shown
    assert pre(r.text, "run-1-message-1") != pre(r.text, "run-2-message-1")
    assert "one or two short sentences" in pre(r.text, "run-2-message-1")
    assert await logged(engine) == 0


async def test_the_model_gets_exactly_the_messages_shown(
    new_browser: OpenBrowser, settings: Any, org: Org, agent: str, engine: Any, respx_mock: Any
) -> None:
    route = respx_mock.post(CHAT).mock(return_value=chat_reply("Behind the building, on Elm Street."))
    async with new_browser(settings=llm_settings(settings)) as browser:
        csrf = await sign_in(browser, org.admin_key)
        r = await browser.post(
            "/console/playground", data=play(csrf, agent, "Where can I park?", compare_variant="concise")
        )
        skipped = await browser.post(
            "/console/playground", data=play(csrf, agent, "Where can I park?", skip_model="1")
        )
    assert r.status_code == 200, r.text
    assert route.call_count == 2  # one per variant; the skipped run asked nothing
    for run in (1, 2):
        sent = json.loads(route.calls[run - 1].request.content)
        assert [m["content"] for m in sent["messages"]] == [
            pre(r.text, f"run-{run}-message-1"),
            pre(r.text, f"run-{run}-message-2"),
        ]
    assert "Behind the building, on Elm Street." in text_of(r.text)
    assert "Answered by gpt-4o-mini" in text_of(r.text)
    assert PARKING in text_of(skipped.text)
    assert "Answered by extractive (model gpt-4o-mini not called)" in text_of(skipped.text)
    assert 'name="skip_model" value="1" checked' in skipped.text
    assert await logged(engine) == 0


async def test_running_needs_the_csrf_token(signed_in: Browser, agent: str, engine: Any) -> None:
    browser, _ = signed_in
    r = await browser.post("/console/playground", data={"agent_id": agent, "query": "Where can I park?"})
    assert r.status_code == 403
    assert PARKING not in r.text


async def test_a_question_with_markup_is_shown_as_text(signed_in: Browser, agent: str) -> None:
    browser, csrf = signed_in
    question = "<script>alert('x')</script> where can I park?"
    for headers in ({}, {"HX-Request": "true"}):
        r = await browser.post("/console/playground", data=play(csrf, agent, question), headers=headers)
        assert r.status_code == 200
        assert "<script>alert" not in r.text
        assert "&lt;script&gt;alert(" in r.text


async def test_missing_input_is_refused_with_the_form(signed_in: Browser, agent: str) -> None:
    browser, csrf = signed_in
    r = await browser.post("/console/playground", data=play(csrf, agent, "   "))
    assert r.status_code == 422
    assert 'id="error-query"' in r.text
    r = await browser.post("/console/playground", data=play(csrf, "", "Where can I park?"))
    assert r.status_code == 422
    assert 'id="error-agent_id"' in r.text
    r = await browser.post("/console/playground", data=play(csrf, agent, "Where?", variant="nope"))
    assert r.status_code == 422
    assert 'id="error-variant"' in r.text
    assert "one of: default, concise" in text_of(r.text)
    # htmx swaps only what succeeds: its fragment carries the errors.
    r = await browser.post("/console/playground", data=play(csrf, agent, ""), headers={"HX-Request": "true"})
    assert r.status_code == 200
    assert 'href="#field-query"' in r.text


async def test_another_organisations_agent_is_not_found(
    signed_in: Browser, client: Client, sessionmaker: Any, drain_queue: Any, engine: Any
) -> None:
    browser, csrf = signed_in
    other = await make_org(sessionmaker, "Other")
    kb = await create_kb(client, other.headers, "Theirs")
    await create_text_doc(client, other.headers, kb["id"], content=FAQ, content_type="markdown")
    theirs = await assign_new_agent(client, other.headers, kb["id"])
    await drain_queue()
    r = await browser.post("/console/playground", data=play(csrf, theirs, "Where can I park?"))
    assert r.status_code == 404
    assert PARKING not in r.text
    page = await browser.get("/console/playground")
    assert theirs not in page.text
    assert await logged(engine) == 0


HISTORY = "Caller: Where can I park?\nAgent: Behind the building, entrance on Elm Street."


async def test_earlier_turns_make_the_follow_up_standalone(
    signed_in: Browser, agent: str, engine: Any
) -> None:
    browser, csrf = signed_in
    page = await browser.get("/console/playground", params={"agent_id": agent})
    assert '<label for="field-history">' in page.text
    r = await browser.post("/console/playground", data=play(csrf, agent, "Is it free?", history=HISTORY))
    assert r.status_code == 200, r.text
    shown = text_of(r.text)
    assert "Asked as Is it free (park)? (made standalone offline)" in shown
    assert "Is it free (park)?" in pre(r.text, "run-1-message-2")
    assert "Messages for the rewrite" not in shown  # no model: nothing was sent to rewrite it
    assert f"{HISTORY}</textarea>" in r.text  # kept in the form
    assert await logged(engine) == 0


async def test_the_rewrite_model_gets_exactly_the_messages_shown(
    new_browser: OpenBrowser, settings: Any, org: Org, agent: str, respx_mock: Any
) -> None:
    route = respx_mock.post(CHAT).mock(
        side_effect=[chat_reply("Is the parking behind the building free?"), chat_reply("Yes, it is free.")]
    )
    async with new_browser(settings=llm_settings(settings)) as browser:
        csrf = await sign_in(browser, org.admin_key)
        r = await browser.post("/console/playground", data=play(csrf, agent, "Is it free?", history=HISTORY))
    assert r.status_code == 200, r.text
    assert route.call_count == 2
    rewrite = json.loads(route.calls[0].request.content)["messages"]
    assert [m["content"] for m in rewrite] == [pre(r.text, f"run-1-rewrite-{i}") for i in (1, 2)]
    assert "Behind the building, entrance on Elm Street." in pre(r.text, "run-1-rewrite-2")
    shown = text_of(r.text)
    assert "Asked as Is the parking behind the building free? (made standalone by the model)" in shown
    assert "Yes, it is free." in shown


async def test_a_turn_without_its_speaker_is_refused_with_the_form(signed_in: Browser, agent: str) -> None:
    browser, csrf = signed_in
    r = await browser.post(
        "/console/playground", data=play(csrf, agent, "Is it free?", history="Where can I park?")
    )
    assert r.status_code == 422
    assert 'id="error-history"' in r.text
    assert "Start each line with “Caller:” or “Agent:” (not “Where can I park?”)." in text_of(r.text)
