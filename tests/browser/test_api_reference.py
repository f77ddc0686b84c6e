"""/schema in a real Chromium: Swagger UI renders the operation list from the service's own
files, with HTTPS (any CDN) blocked, and a call tried from it carries the key it was given."""

from __future__ import annotations

import json

import httpx

from tests.browser.conftest import Page
from tests.conftest import Org


def test_swagger_ui_lists_the_operations_offline(page: Page) -> None:
    # Every HTTPS request (a CDN's) fails at once, as on a machine without Internet access;
    # the service itself is plain HTTP on loopback.
    page.driver.execute_cdp_cmd("Network.enable", {})
    page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["https://*"]})
    try:
        page.open("/schema")
        page.wait(lambda d: page.find_all(".opblock-summary-path"), "no operation rendered")
        paths = {element.text.replace("\u200b", "") for element in page.find_all(".opblock-summary-path")}
        assert "/api/knowledge" in paths
        assert "/api/agents/{agent_id}/query_knowledge" in paths
        assert page.text(".info .title").startswith("Voice knowledge service")
        assert page.find_all(".errors-wrapper") == []
        loaded = page.driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert loaded
        assert all(url.startswith(page.base_url + "/schema/assets/") for url in loaded), loaded
        severe = [entry for entry in page.driver.get_log("browser") if entry["level"] == "SEVERE"]
        assert severe == []
    finally:
        page.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})


def test_a_call_tried_from_the_reference_reaches_the_api_with_the_key(page: Page, org: Org) -> None:
    created = httpx.post(f"{page.base_url}/api/knowledge", json={"title": "Front desk"}, headers=org.headers)
    assert created.status_code == 201, created.text
    page.open("/schema")
    page.wait(lambda d: page.find_all(".btn.authorize"), "no Authorize button")
    page.find(".btn.authorize").click()
    page.find(".auth-container input").send_keys(org.admin_key)
    page.find(".auth-btn-wrapper .authorize").click()
    page.find(".auth-btn-wrapper .btn-done").click()

    operation = page.find(".opblock[id$='-ApiKnowledgeListKnowledge']")  # GET /api/knowledge
    operation.find_element("css selector", ".opblock-summary").click()
    page.wait(
        lambda d: operation.find_elements("css selector", ".try-out__btn"), "the operation did not open"
    )
    operation.find_element("css selector", ".try-out__btn").click()
    operation.find_element("css selector", ".execute").click()
    page.wait(lambda d: operation.find_elements("css selector", ".live-responses-table"), "no response shown")
    status = operation.find_element("css selector", ".live-responses-table tr.response .response-col_status")
    assert status.text == "200"
    body = json.loads(
        operation.find_element(
            "css selector", ".live-responses-table tr.response .response-col_description .microlight"
        ).text
    )
    assert [kb["title"] for kb in body["items"]] == ["Front desk"]
