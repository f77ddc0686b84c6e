"""Browser tests: the real app behind uvicorn on a loopback port (test PostgreSQL, ingestion
workers running, so an uploaded file becomes ready as it would in production), driven by
Debian's Chromium through chromedriver with Selenium.

Nothing is downloaded: the browser and driver are the system's (``scripts/test`` installs the
``chromium`` and ``chromium-driver`` packages when it can), and Selenium Manager, which would
fetch a driver from the Internet, is switched off. Without them the tests are skipped, except
under CI=true, where they fail: a skip there would hide a broken set-up.

``VK_SCREENSHOTS=1`` makes the tests that show a main page save it under docs/screenshots/
(only then: a normal run leaves the clone untouched).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from litestar import Litestar
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait

from app.config import Settings
from app.main import create_app
from tests.conftest import ON_CI, REPO, fake_resolver
from tests.helpers import free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PACKAGES = "chromium chromium-driver"
SCREENSHOTS = REPO / "docs" / "screenshots"
DESKTOP = (1280, 800)
PHONE = (390, 844)
# The longest a page may take to show what a test waits for: ingestion of a small PDF by a
# worker polling every 0.2 s, on a machine shared with other work.
WAIT_S = 30.0

pytestmark = pytest.mark.timeout(300)


def _missing() -> list[str]:
    return [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]


@pytest.fixture(scope="session")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium for the session; each test gets it with no cookies (``page``)."""
    if missing := _missing():
        reason = f"needs {' and '.join(missing)}: install the Debian packages {PACKAGES}"
        if ON_CI:
            pytest.fail(f"{reason} (CI=true: the browser tests must run, not be skipped)", pytrace=False)
        pytest.skip(reason)
    # Selenium Manager would download a browser or driver it thinks is missing.
    os.environ["SE_OFFLINE"] = "true"
    profile = tempfile.mkdtemp(prefix="vk-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(argument)
    # Browser console messages, read by tests that check a page ran no script it should not.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def live_app(database_url: str, settings: Settings) -> Litestar:
    """The test settings with ingestion workers in the server process, polling often."""
    ingestion = settings.ingestion.model_copy(update={"workers": 1, "poll_interval_s": 0.2})
    return create_app(
        settings.model_copy(update={"ingestion": ingestion}),
        database_url=database_url,
        resolver=fake_resolver,
        run_workers=True,
    )


@pytest.fixture
def base_url(live_app: Litestar, _clean_tables: None) -> Iterator[str]:
    """The app behind uvicorn in a thread of its own (its own event loop), on a free port;
    started after the tables are emptied, stopped (workers included) before the next test."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(live_app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + WAIT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the app did not start", pytrace=False)
        time.sleep(0.05)
    assert httpx.get(f"{url}/health").status_code == 200
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@dataclass
class Page:
    """The browser on the live app: short helpers for what every journey does."""

    driver: WebDriver
    base_url: str

    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)

    def wait(self, condition: Callable[[WebDriver], object], message: str = "") -> object:
        # htmx replaces fragments while a condition reads them: a stale element means "again".
        # Chromium reports an element swapped out between finding and reading it either as
        # stale or, in a narrower window, as a node that "does not belong to the document".
        def swapped_tolerant(driver: WebDriver) -> object:
            try:
                return condition(driver)
            except WebDriverException as exc:
                if "does not belong to the document" in (exc.msg or ""):
                    return False
                raise

        wait = WebDriverWait(
            self.driver, WAIT_S, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]
        )
        return wait.until(swapped_tolerant, message)

    def find(self, css: str) -> WebElement:
        return self.driver.find_element("css selector", css)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements("css selector", css)

    def text(self, css: str = "body") -> str:
        return self.find(css).text

    def resize(self, width: int, height: int) -> None:
        self.driver.set_window_size(width, height)

    def screenshot(self, name: str, *, at: str | None = None) -> None:
        """docs/screenshots/<name>.png under VK_SCREENSHOTS=1: the viewport (scrolled to the
        element ``at`` names), reduced to a palette of 128 colours (a fraction of the size;
        the console's flat colours survive)."""
        if os.environ.get("VK_SCREENSHOTS", "") != "1":
            return
        from PIL import Image

        if at is not None:
            self.driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", self.find(at))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        image = Image.open(io.BytesIO(self.driver.get_screenshot_as_png())).convert("RGB")
        image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(
            SCREENSHOTS / f"{name}.png", optimize=True
        )


@pytest.fixture
def page(browser: WebDriver, base_url: str) -> Iterator[Page]:
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    browser.set_window_size(*DESKTOP)
    browser.get_log("browser")  # drop what earlier tests logged
    yield Page(browser, base_url)
    browser.get("about:blank")
