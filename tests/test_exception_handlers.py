"""The error mapping shared by every route: database outages are 503, a transaction aborted
for a concurrent one 409, the rest 500."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from litestar import get, post
from litestar.params import JSONBody
from litestar.testing import create_test_client
from sqlalchemy.exc import DBAPIError

from app.exception_handlers import HANDLERS
from app.http import ApiRequest, require_json_body


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


class _Rollback(Exception):
    sqlstate = "40P01"


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
        asyncpg.exceptions.SerializationError("could not serialize access"),
        DBAPIError("DELETE FROM knowledge_bases", {}, _Rollback("deadlock detected")),
    ],
)
def test_a_transaction_aborted_for_another_is_409_retry(exc: Exception) -> None:
    @get("/boom", sync_to_thread=False)
    def boom() -> None:
        raise exc

    with create_test_client([boom], exception_handlers=HANDLERS) as client:
        r = client.get("/boom")
    assert (r.status_code, r.headers["Retry-After"], r.json()) == (
        409,
        "1",
        {
            "error": "conflict",
            "detail": "a concurrent change got in the way; nothing was changed, retry the request",
        },
    )


def test_other_errors_are_500_without_details() -> None:
    @get("/boom", sync_to_thread=False)
    def boom() -> None:
        raise RuntimeError("secret internals")

    with create_test_client([boom], exception_handlers=HANDLERS) as client:
        r = client.get("/boom")
    assert r.status_code == 500
    assert r.json() == {"error": "internal_error", "detail": "an internal error occurred; it has been logged"}


@pytest.mark.parametrize(
    "exc", [RecursionError("deep"), UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")]
)
def test_decode_errors_outside_body_decoding_stay_500(exc: Exception) -> None:
    """ApiRequest turns RecursionError and UnicodeDecodeError into 400s only around the body's
    decoding: the same errors from a handler are bugs, and stay 500s."""

    @post("/boom", sync_to_thread=False)
    def boom(data: JSONBody[dict[str, Any]]) -> None:
        raise exc

    with create_test_client(
        [boom], exception_handlers=HANDLERS, request_class=ApiRequest, before_request=require_json_body
    ) as client:
        r = client.post("/boom", json={"a": 1})
        assert r.status_code == 500
        deep = client.post(
            "/boom", content=b"[" * 5000 + b"]" * 5000, headers={"Content-Type": "application/json"}
        )
        assert (deep.status_code, deep.json()["detail"]) == (400, "the request body is nested too deeply")


def test_the_status_counted_for_an_error_is_the_one_answered():
    import asyncpg
    from litestar.exceptions import InternalServerException, NotFoundException

    from app.errors import TooManyRequests, Unauthorized
    from app.exception_handlers import status_of

    assert [
        status_of(Unauthorized("unknown or revoked API key")),
        status_of(TooManyRequests("rate limit")),
        status_of(NotFoundException()),
        status_of(TimeoutError()),  # a database that hangs
        status_of(ConnectionRefusedError()),
        status_of(asyncpg.exceptions.SerializationError("x")),
        status_of(InternalServerException("client disconnected prematurely")),  # not the service's
        status_of(ValueError("a bug")),
    ] == [401, 429, 404, 503, 503, 409, 499, 500]


def test_a_client_gone_is_answered_499_not_500():
    # Nobody hears the answer; as a 500 it counted as the service's error in /metrics.
    from litestar.exceptions import InternalServerException

    from app.exception_handlers import http_error

    response = http_error(None, InternalServerException("client disconnected prematurely"))  # type: ignore[arg-type]
    assert (response.status_code, response.content) == (
        499,
        {"error": "client_closed_request", "detail": "the client closed the connection first"},
    )
