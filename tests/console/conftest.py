"""Console test set-up: a browser-like client signed in with an organisation's admin key.

``signed_in`` gives (client, csrf token) for the ``org`` fixture's organisation; forms are
posted with ``form(csrf, ...)``. Helpers for any console test live in tests/console/helpers.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.conftest import Org
from tests.console.helpers import sign_in


@pytest.fixture
async def signed_in(app: Litestar, org: Org) -> AsyncIterator[tuple[AsyncTestClient[Litestar], str]]:
    async with AsyncTestClient(app=app) as client:
        csrf = await sign_in(client, org.admin_key)
        yield client, csrf
