"""Console test set-up: browsers, each a test client of an app of its own, signed in with an
organisation's admin key as a person would (the sign-in form).

Each browser has its own app: two test clients on one app would each run its lifespan, and
the second would replace the first's engine under it. ``client`` (tests/conftest.py) stays
the API client; browsers and it share the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from app.config import Settings
from app.main import create_app
from tests.conftest import Org, fake_resolver
from tests.console.helpers import sign_in

Browser = AsyncTestClient[Litestar]
OpenBrowser = Callable[..., AbstractAsyncContextManager[Browser]]


@pytest.fixture
def new_browser(database_url: str, settings: Settings) -> OpenBrowser:
    """``async with new_browser() as browser``: a client with its own cookies and app;
    ``new_browser(settings=..., base_url="https://...")`` to vary them."""

    @asynccontextmanager
    async def open_browser(
        settings: Settings = settings, base_url: str = "http://testserver.local"
    ) -> AsyncIterator[Browser]:
        app = create_app(settings, database_url=database_url, resolver=fake_resolver, run_workers=False)
        async with AsyncTestClient(app=app, base_url=base_url) as browser:
            yield browser

    return open_browser


@pytest.fixture
async def signed_in(new_browser: OpenBrowser, org: Org) -> AsyncIterator[tuple[Browser, str]]:
    """A browser signed in to ``org``'s console, and its session's CSRF token."""
    async with new_browser() as browser:
        csrf = await sign_in(browser, org.admin_key)
        yield browser, csrf
