"""/schema in a real Chromium: Swagger UI renders the operation list from the service's own
files, with HTTPS (any CDN) blocked."""

from __future__ import annotations

from tests.browser.conftest import Page


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
