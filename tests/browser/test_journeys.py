"""What an operator does in the console, in a real Chromium against the real app: sign in with
the admin key, create a knowledge base, upload a PDF and watch it become ready, read its
chunks, assign an agent and try it in the playground, manage keys, sign out. Plus what must
not happen (a query key signing in, a title run as script) and what must keep working (a
390 px phone, the keyboard alone).

Every wait is on a condition the page shows; ``VK_SCREENSHOTS=1`` saves the main pages
(tests/browser/conftest.py).
"""

from __future__ import annotations

import json

import httpx
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.select import Select

from app.console.sessions import QUERY_KEY
from app.keys.service import visible_prefix
from tests.browser.conftest import PHONE, Page
from tests.conftest import Org
from tests.fixtures.pdfs import make_pdf

HOURS = (
    "Opening hours\n"
    "The front desk is open from eight to six on weekdays.\n"
    "On Saturdays we open from nine to noon; on Sundays we are closed."
)
SATURDAYS = "On Saturdays we open from nine to noon; on Sundays we are closed."
QUESTION = "When are you open on Saturdays?"
AGENT = "6f1d0c2e-8a4b-4c3e-9f5a-2b7d1e0a9c11"
PARKING = "Parking\nVisitors park free of charge in the courtyard behind the building."


def sign_in(page: Page, key: str) -> None:
    page.open("/console/sign-in")
    page.find("#field-api_key").send_keys(key)
    page.find("form[action='/console/sign-in'] button[type=submit]").click()


def signed_in(page: Page, org: Org) -> None:
    sign_in(page, org.admin_key)
    page.wait(lambda d: d.current_url == f"{page.base_url}/console/knowledge", "not on the KB list")


def create_kb(page: Page, title: str, description: str = "") -> str:
    """Through the form; returns the new knowledge base's path."""
    page.open("/console/knowledge/new")
    page.find("#field-title").send_keys(title)
    if description:
        page.find("#field-description").send_keys(description)
    page.find("form[action='/console/knowledge'] button[type=submit]").click()
    page.wait(lambda d: page.find_all("#documents"), "the new KB's page did not open")
    return page.driver.current_url.removeprefix(page.base_url).split("?")[0]


def status_of(page: Page, title: str) -> str:
    for row in page.find_all("#documents tbody tr"):
        if row.find_element("css selector", "td.title-cell").text == title:
            return row.find_element("css selector", ".status").text
    return ""


def test_operator_journey_from_sign_in_to_sign_out(page: Page, org: Org, tmp_path) -> None:
    signed_in(page, org)
    assert page.text("h1") == "Knowledge bases"
    assert page.text(".card").startswith("No knowledge bases yet.")
    kb_path = create_kb(page, "Front desk", "What callers ask the front desk")
    assert page.text("h1") == "Front desk"
    assert page.text(".flash") == "Knowledge base created."

    pdf = tmp_path / "front-desk.pdf"
    pdf.write_bytes(make_pdf([HOURS, PARKING]))
    page.find(".page-head .actions a[href$='/documents/new']").click()
    page.find("#field-files").send_keys(str(pdf))
    page.find("form[action$='/documents/upload'] button[type=submit]").click()
    page.wait(lambda d: d.current_url.endswith(f"{kb_path}?done=docs-added"), "no redirect after the upload")
    assert page.text(".flash") == "Documents added: they are being processed."
    # The page is not reloaded while the worker ingests: a mark set now survives until ready.
    page.driver.execute_script("window.vkNotReloaded = true")
    page.wait(lambda d: status_of(page, "front-desk") == "ready", "the PDF never showed as ready")
    assert page.driver.execute_script("return window.vkNotReloaded") is True
    # The facts card came with the same polled fragment as the row: its counts are current.
    assert page.text("#kb-facts").split("\n")[:4] == ["Documents", "1", "Chunks", "2"]
    assert page.find("#kb-facts button[data-copy]").is_displayed()
    row = page.find("#documents tbody tr")
    assert row.find_element("css selector", "td.num").text == "2"
    assert "pdf · front-desk.pdf" in row.text
    page.screenshot("documents")

    row.find_element("css selector", "td.title-cell a").click()
    page.wait(lambda d: page.find_all("article.chunk"), "no chunks shown")
    assert page.text("h1") == "front-desk"
    chunks = page.find_all("article.chunk")
    assert [c.find_element("css selector", ".chunk-meta").text.split(" · ")[:2] for c in chunks] == [
        ["#1", "page 1"],
        ["#2", "page 2"],
    ]
    assert chunks[0].find_element("css selector", ".chunk-text").text == HOURS
    assert chunks[1].find_element("css selector", ".chunk-text").text == PARKING
    page.screenshot("chunks")

    assign_agent(page)
    ask_in_playground(page)
    key = create_query_key(page)
    call_the_agent_and_see_the_log(page, key)
    revoke(page, key)

    page.open("/console/knowledge")
    assert [a.text for a in page.find_all("td.title-cell a")] == ["Front desk"]
    assert [td.text for td in page.find_all("tbody tr td.num")] == ["1", "2", "1"]
    page.screenshot("knowledge-bases")

    page.find("form.sign-out button[type=submit]").click()
    page.wait(lambda d: d.current_url.endswith("/console/sign-in?done=signed-out"), "not signed out")
    assert page.text(".flash") == "You are signed out."
    page.open("/console/knowledge")
    page.wait(lambda d: "/console/sign-in" in d.current_url, "a signed-out browser still saw the list")
    assert page.find_all("nav[aria-label=Console]") == []


def assign_agent(page: Page) -> None:
    page.find("nav[aria-label=Console] a[href='/console/agents']").click()
    page.wait(lambda d: page.text("h1") == "Agents", "no agents page")
    assert page.text(".card").startswith("No agents yet.")
    page.find(".page-head .actions a[href='/console/agents/new']").click()
    page.find("#field-agent_id").send_keys(AGENT)
    Select(page.find("#field-kb_id")).select_by_visible_text("Front desk")
    page.find("form[action='/console/agents/'] button[type=submit]").click()
    page.wait(lambda d: page.text("h1") == f"Agent {AGENT}", "the agent's page did not open")
    assert page.text(".flash") == "Knowledge base assigned to the agent."
    assert [a.text for a in page.find_all("td.title-cell a")] == ["Front desk"]
    declaration = json.loads(page.text("#tool-openai-realtime"))
    assert declaration["name"] == "query_knowledge"
    # Its knowledge base holds a ready document: no "not available yet" on any declaration.
    assert page.find_all("section.card .reason") == []
    page.screenshot("agent", at="#tool")


def ask_in_playground(page: Page) -> None:
    page.find("nav[aria-label=Console] a[href='/console/playground']").click()
    Select(page.find("#field-agent_id")).select_by_value(AGENT)
    page.find("#field-query").send_keys(QUESTION)
    page.find("form[action='/console/playground'] button[type=submit]").click()
    # htmx puts the results under the form; the page stays (the question is still typed in).
    page.wait(lambda d: page.find_all("#playground-results h2"), "no playground results")
    assert page.text("#playground-results h2") == f"Results for “{QUESTION}”"
    assert page.find("#field-query").get_attribute("value") == QUESTION
    assert page.text("#playground-results .answer") == SATURDAYS
    fused = page.find_all("#playground-results .run table")[1].find_elements("css selector", "tbody tr")
    assert fused[0].find_element("css selector", "td.title-cell strong").text == "front-desk"
    page.screenshot("playground", at="#playground-results")
    # A follow-up, with the call so far: it is made standalone before it is searched.
    page.find("#field-query").clear()
    page.find("#field-query").send_keys("And on Sundays?")
    page.find("#field-history").send_keys(f"Caller: {QUESTION}\nAgent: From nine to noon.")
    page.find("form[action='/console/playground'] button[type=submit]").click()
    page.wait(
        lambda d: page.text("#playground-results h2") == "Results for “And on Sundays?”",
        "no follow-up results",
    )
    assert page.text("#playground-results .standalone") == "And on Sundays (open)? (made standalone offline)"
    assert page.text("#playground-results .answer") == SATURDAYS


def create_query_key(page: Page) -> str:
    page.find("nav[aria-label=Console] a[href='/console/keys']").click()
    page.find(".page-head .actions a[href='/console/keys/new']").click()
    page.find("#field-name").send_keys("Voice runtime")
    Select(page.find("#field-role")).select_by_value("query")
    page.find("form[action='/console/keys/'] button[type=submit]").click()
    page.wait(lambda d: page.text("h1") == "Key created", "the new key was not shown")
    key = page.text("#new-key")
    assert key.startswith("vk_")
    return key


def call_the_agent_and_see_the_log(page: Page, key: str) -> None:
    """The voice runtime calls with the new key; the call shows in the query log."""
    r = httpx.post(
        f"{page.base_url}/api/agents/{AGENT}/query_knowledge",
        json={"query": QUESTION},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["answer"] == SATURDAYS
    page.find("nav[aria-label=Console] a[href='/console/query-log']").click()
    Select(page.find("#field-agent_id")).select_by_value(AGENT)
    page.find("form[action='/console/query-log'] button[type=submit]").click()
    page.wait(lambda d: page.find_all("tbody tr"), "the call is not in the query log")
    rows = page.find_all("tbody tr")
    assert len(rows) == 1
    assert rows[0].find_element("css selector", "td.title-cell a").text == QUESTION
    assert rows[0].find_element("css selector", ".status").text == "answered"
    page.screenshot("query-log")


def revoke(page: Page, key: str) -> None:
    page.find("nav[aria-label=Console] a[href='/console/keys']").click()
    page.find(f"a[aria-label='Revoke key {visible_prefix(key)}']").click()
    page.find("form[action$='/revoke'] button[type=submit]").click()
    page.wait(lambda d: page.find_all(".flash"), "no message after revoking")
    assert page.text(".flash") == "Key revoked: it no longer works."
    statuses = {
        row.find_element("css selector", "td.title-cell").text: row.find_element(
            "css selector", ".status"
        ).text
        for row in page.find_all("tbody tr")
    }
    assert statuses["Voice runtime"] == "revoked"
    r = httpx.post(
        f"{page.base_url}/api/agents/{AGENT}/query_knowledge",
        json={"query": QUESTION},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert r.status_code == 401


def test_a_query_key_cannot_sign_in(page: Page, org: Org) -> None:
    r = httpx.post(f"{page.base_url}/api/keys", json={"role": "query"}, headers=org.headers)
    assert r.status_code == 201, r.text
    sign_in(page, r.json()["key"])
    page.wait(lambda d: page.find_all(".error-summary"), "no refusal shown")
    assert page.text(".error-summary") == QUERY_KEY
    assert page.driver.current_url == f"{page.base_url}/console/sign-in"
    assert page.find("#field-api_key").get_attribute("value") == ""
    page.open("/console/knowledge")
    page.wait(lambda d: "/console/sign-in" in d.current_url, "the query key's refusal left a session")


def test_a_script_in_a_title_is_shown_as_text_and_never_run(page: Page, org: Org) -> None:
    title = '<script>window.vkRan = true</script><img src=x onerror="window.vkRan = true">'
    signed_in(page, org)
    create_kb(page, title, description=title)
    assert page.text("h1") == title
    assert page.driver.title == f"{title} · Voice knowledge"
    page.open("/console/knowledge")
    assert [a.text for a in page.find_all("td.title-cell a")] == [title]
    assert page.find_all("td.title-cell script, td.title-cell img") == []
    assert page.driver.execute_script("return window.vkRan === undefined") is True


def test_on_a_390_px_phone_the_navigation_and_forms_work(page: Page, org: Org) -> None:
    page.resize(*PHONE)
    signed_in(page, org)
    assert page.driver.execute_script("return window.innerWidth") == PHONE[0]
    # Nothing wider than the screen: no sideways scrolling to reach a control.
    assert page.driver.execute_script("return document.documentElement.scrollWidth") <= PHONE[0]
    labels = ["Knowledge bases", "Agents", "Keys", "Query log", "Playground"]
    links = page.find_all("nav[aria-label=Console] a")
    assert [link.text for link in links] == labels
    for link in links:
        rect = page.driver.execute_script("return arguments[0].getBoundingClientRect().toJSON()", link)
        assert link.is_displayed(), link.text
        assert 0 <= rect["left"] < rect["right"] <= PHONE[0], (link.text, rect)

    create_kb(page, "Phone KB")
    assert page.text("h1") == "Phone KB"
    # The longest form: a document written in the browser, down to its status turning ready.
    page.find(".page-head .actions a[href$='/documents/new']").click()
    text_form = "form[action$='/documents/text']"
    page.find(f"{text_form} #text-title").send_keys("Parking")
    page.find(f"{text_form} #text-content").send_keys(PARKING)
    page.find(f"{text_form} button[type=submit]").click()
    page.wait(lambda d: page.text("h1") == "Parking", "the document's page did not open")
    assert page.text(".flash") == "Document added: it is being processed."
    page.wait(lambda d: page.text("#doc-status .status") == "ready", "the document never showed as ready")
    assert page.driver.execute_script("return document.documentElement.scrollWidth") <= PHONE[0]
    page.find("nav[aria-label=Console] a[href='/console/knowledge']").click()
    page.wait(lambda d: [a.text for a in page.find_all("td.title-cell a")] == ["Phone KB"], "KB not listed")
    assert page.driver.execute_script("return document.documentElement.scrollWidth") <= PHONE[0]
    page.screenshot("knowledge-bases-390")


def focused(page: Page) -> str:
    """What has the keyboard focus, as a reader would name it."""
    return str(
        page.driver.execute_script(
            "const e = document.activeElement;"
            "return e.tagName.toLowerCase() + ':' + (e.getAttribute('aria-label') || e.id || e.textContent.trim());"
        )
    )


def tab_through(page: Page, presses: int) -> list[str]:
    seen = []
    for _ in range(presses):
        page.driver.switch_to.active_element.send_keys(Keys.TAB)
        seen.append(focused(page))
    return seen


def test_the_keyboard_alone_signs_in_and_reaches_the_main_controls(page: Page, org: Org) -> None:
    page.open("/console/sign-in")
    order = tab_through(page, 3)
    assert order == ["a:Skip to content", "a:Voice knowledge", "input:field-api_key"]
    page.driver.switch_to.active_element.send_keys(org.admin_key, Keys.ENTER)
    page.wait(lambda d: d.current_url == f"{page.base_url}/console/knowledge", "Enter did not sign in")

    order = tab_through(page, 9)
    assert order == [
        "a:Skip to content",
        "a:Voice knowledge",
        "a:Knowledge bases",
        "a:Agents",
        "a:Keys",
        "a:Query log",
        "a:Playground",
        "button:Sign out",
        "a:New knowledge base",
    ]
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    page.wait(lambda d: d.current_url.endswith("/console/knowledge/new"), "Enter did not follow the link")
    # The skip link jumps over the navigation to the page's first field.
    assert tab_through(page, 1) == ["a:Skip to content"]
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    assert tab_through(page, 1) == ["input:field-title"]
    page.driver.switch_to.active_element.send_keys("Typed only", Keys.ENTER)
    page.wait(lambda d: page.text("h1") == "Typed only", "Enter in the form did not create the KB")
