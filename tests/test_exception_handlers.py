"""The error mapping shared by every route: database outages are 503, the rest 500."""

from __future__ import annotations

import asyncpg
import pytest
from litestar import get
from litestar.testing import create_test_client

from app.exception_handlers import HANDLERS


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.InterfaceError("connection is closed"),
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.CannotConnectNowError("the database system is starting up"),
    ],
)
def test_raw_asyncpg_outages_are_503_with_retry_after(exc: Exception) -> None:
    @get("/boom", sync_to_thread=False)
    def boom() -> None:
        raise exc

    with create_test_client([boom], exception_handlers=HANDLERS) as client:
        r = client.get("/boom")
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "2"
    assert r.json() == {"error": "unavailable", "detail": "the database is unavailable; retry shortly"}


def test_other_errors_are_500_without_details() -> None:
    @get("/boom", sync_to_thread=False)
    def boom() -> None:
        raise RuntimeError("secret internals")

    with create_test_client([boom], exception_handlers=HANDLERS) as client:
        r = client.get("/boom")
    assert r.status_code == 500
    assert r.json() == {"error": "internal_error", "detail": "an internal error occurred; it has been logged"}
