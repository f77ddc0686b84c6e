"""The console's lists on a 390 px phone: every column left shown fits, so a row's links are
reached without scrolling sideways, neither the page nor a table inside it."""

from __future__ import annotations

import httpx
from selenium.webdriver.remote.webelement import WebElement

from tests.browser.conftest import PHONE, Page
from tests.browser.test_journeys import signed_in
from tests.conftest import Org

# Long enough to wrap, as real titles do.
TITLE = "Front desk: opening hours, parking and deliveries"
AGENT = "6f1d0c2e-8a4b-4c3e-9f5a-2b7d1e0a9c11"
QUESTION = "When does the front desk open?"


def sideways_scrollers(page: Page) -> list[str]:
    """Elements wider than the space they show (a table scrolling inside its wrapper
    included), and the page itself if it is wider than the window."""
    return list(
        page.driver.execute_script(
            "const wide = [];"
            "if (document.documentElement.scrollWidth > window.innerWidth) wide.push('html');"
            "for (const e of document.querySelectorAll('body *')) {"
            "  if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')"
            "    wide.push(e.tagName.toLowerCase() + '.' + e.className);"
            "}"
            "return wide;"
        )
    )


def right_edge(page: Page, element: WebElement) -> float:
    return float(page.driver.execute_script("return arguments[0].getBoundingClientRect().right", element))


def test_on_a_390_px_phone_every_list_fits_without_sideways_scrolling(page: Page, org: Org) -> None:
    api = page.base_url + "/api"
    kb = httpx.post(f"{api}/knowledge", json={"title": TITLE}, headers=org.headers).json()
    doc = {"title": "Opening hours and the way to the parking", "content": "We open at nine."}
    r = httpx.post(f"{api}/knowledge/{kb['id']}/documents", json=doc, headers=org.headers)
    assert r.status_code == 202, r.text
    r = httpx.put(f"{api}/knowledge/{kb['id']}/agents", json={"agent_ids": [AGENT]}, headers=org.headers)
    assert r.status_code == 200, r.text
    r = httpx.post(f"{api}/keys", json={"role": "query", "name": "Voice runtime"}, headers=org.headers)
    assert r.status_code == 201, r.text
    query_key = r.json()["key"]
    r = httpx.post(
        f"{api}/agents/{AGENT}/query_knowledge",
        json={"query": QUESTION},
        headers={"Authorization": f"Bearer {query_key}"},
    )
    assert r.status_code == 200, r.text

    page.resize(*PHONE)
    signed_in(page, org)
    assert page.driver.execute_script("return window.innerWidth") == PHONE[0]
    assert sideways_scrollers(page) == []
    for link in ("Edit", "Delete"):
        assert right_edge(page, page.find(f"a[aria-label='{link} {TITLE}']")) <= PHONE[0], link

    for path in (
        f"/console/knowledge/{kb['id']}",
        "/console/agents",
        f"/console/agents/{AGENT}",
        "/console/keys",
        f"/console/query-log?agent_id={AGENT}",
    ):
        page.open(path)
        page.wait(lambda d: page.find_all("tbody tr"), f"no table rows on {path}")
        assert sideways_scrollers(page) == [], path
        for link in page.find_all("tbody tr a"):
            assert right_edge(page, link) <= PHONE[0], (path, link.text)
