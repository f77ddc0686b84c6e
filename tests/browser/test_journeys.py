"""What an operator does in the console, in a real Chromium against the real app: sign in with
the admin key, create a knowledge base, upload a PDF and watch it become ready, read its
chunks, assign an agent and try it in the playground, manage keys, sign out. Plus what must
not happen (a query key signing in, a title run as script) and what must keep working (a
390 px phone, the keyboard alone).

Every wait is on a condition the page shows; ``VK_SCREENSHOTS=1`` saves the main pages
(tests/browser/conftest.py).
"""

from __future__ import annotations

import httpx
from selenium.webdriver.common.keys import Keys

from app.console.sessions import QUERY_KEY
from tests.browser.conftest import PHONE, Page
from tests.conftest import Org
from tests.fixtures.pdfs import make_pdf

HOURS = (
    "Opening hours\n"
    "The front desk is open from eight to six on weekdays.\n"
    "On Saturdays we open from nine to noon; on Sundays we are closed."
)
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


def test_operator_journey_from_sign_in_to_chunks(page: Page, org: Org, tmp_path) -> None:
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

    page.open("/console/knowledge")
    assert [a.text for a in page.find_all("td.title-cell a")] == ["Front desk"]
    assert [td.text for td in page.find_all("tbody tr td.num")] == ["1", "2", "0"]
    page.screenshot("knowledge-bases")

    page.find("form.sign-out button[type=submit]").click()
    page.wait(lambda d: d.current_url.endswith("/console/sign-in?done=signed-out"), "not signed out")
    assert page.text(".flash") == "You are signed out."
    page.open("/console/knowledge")
    page.wait(lambda d: "/console/sign-in" in d.current_url, "a signed-out browser still saw the list")
    assert page.find_all("nav[aria-label=Console]") == []


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
