"""One place that turns every error into ``{"error", "detail"[, "fields"]}``."""

from __future__ import annotations

import logging
import types
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

import asyncpg
from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.errors import AppError

log = logging.getLogger("app.errors")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    503: "unavailable",
}


def _json(
    status: int, code: str, detail: str, extra: Any = None, headers: dict[str, str] | None = None
) -> Response[Any]:
    body: dict[str, Any] = {"error": code, "detail": detail}
    if extra is not None:
        body["fields"] = extra
    return Response(content=body, status_code=status, media_type=MediaType.JSON, headers=headers)


def app_error(_: Request[Any, Any, Any], exc: AppError) -> Response[Any]:
    return _json(exc.status_code, exc.code, exc.detail, exc.extra, exc.headers)


_PARAM_SOURCES = {"path", "query", "header", "cookie"}


def _choices(annotation: Any) -> list[str]:
    """The values a Literal or Enum annotation (optional or not) accepts."""
    if get_origin(annotation) is Literal:
        return [str(value) for value in get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return [str(member.value) for member in annotation]
    if get_origin(annotation) in (Union, types.UnionType):
        return [value for arg in get_args(annotation) for value in _choices(arg)]
    return []


_EXPECTED = {
    "Expected `bool`, got `str`": "expected true or false",
    "Expected `bool | null`, got `str`": "expected true or false",
    "Expected `int`, got `str`": "expected an integer",
    "Expected `int | null`, got `str`": "expected an integer",
}


def _field_error(request: Request[Any, Any, Any], item: dict[str, Any]) -> dict[str, str]:
    """One problem as ``{"field", "message"}``: a parameter by the name the client sends (a
    header's, not the handler's argument), and msgspec's words made plainer: an invalid
    enum value is followed by the values accepted."""
    key = str(item.get("key") or "")
    message = str(item.get("message", ""))
    handler = request.scope.get("route_handler")
    field = handler.parsed_fn_signature.parameters.get(key) if key and handler is not None else None
    if field is None:
        return {"field": key or "body", "message": message}
    name = getattr(field.kwarg_definition, "name", None) or key
    if message.startswith("Invalid enum value") and (choices := _choices(field.annotation)):
        message = f"{message}; expected one of: {', '.join(choices)}"
    return {"field": name, "message": _EXPECTED.get(message, message)}


def validation_error(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    # Litestar reports body, path and query problems alike; body problems are payload
    # validation (422), malformed parameters are a bad request (400).
    items = exc.extra if isinstance(exc.extra, list) else []
    fields = [_field_error(request, i) for i in items if isinstance(i, dict)]
    # Litestar tags parameter problems with their source; body problems carry none.
    in_body = any(isinstance(i, dict) and i.get("source") not in _PARAM_SOURCES for i in items)
    if fields:
        names = ", ".join(sorted({f["field"] for f in fields}))
        detail = f"invalid {'request body' if in_body else 'parameters'}: {names}"
    else:
        detail = exc.detail or "the request is malformed"
        if "JSON" in detail or "decode" in detail.lower():
            detail = "the request body is not valid JSON"
    return _json(
        422 if in_body and fields else 400,
        "validation_error" if in_body else "bad_request",
        detail,
        fields or None,
    )


def http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if exc.detail == _CLIENT_GONE_DETAIL:  # nobody hears this answer: counted, not a 500
        return _json(CLIENT_GONE, "client_closed_request", "the client closed the connection first")
    status = exc.status_code
    detail = exc.detail
    if status == 413:
        detail = "the request body is larger than the configured limit"
    elif status == 404 and detail in ("", "Not Found"):
        detail = "no such route"
    return _json(status, _CODES.get(status, "error"), detail, headers=exc.headers)


def database_unavailable(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    return _json(
        503, "unavailable", "the database is unavailable; retry shortly", headers={"Retry-After": "2"}
    )


def service_busy(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    # Every pooled connection stayed taken for DB__POOL_TIMEOUT_S: most often too many requests
    # at once, though a database that stopped answering holds them too. Said as what happened.
    log.warning(
        "no database connection came free within the pool's timeout on %s %s",
        request.method,
        request.url.path,
    )
    return _json(
        503,
        "unavailable",
        "no database connection came free in time (too many requests at once, or a database "
        "that does not answer); retry shortly",
        headers={"Retry-After": "2"},
    )


def concurrent_change(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    # PostgreSQL aborted the transaction for another one (deadlock, serialization failure):
    # nothing was written, and the same request will most likely go through if sent again.
    log.warning("transaction aborted by a concurrent one on %s %s", request.method, request.url.path)
    return _json(
        409,
        "conflict",
        "a concurrent change got in the way; nothing was changed, retry the request",
        headers={"Retry-After": "1"},
    )


def dbapi_error(request: Request[Any, Any, Any], exc: DBAPIError) -> Response[Any]:
    if _dbapi_unavailable(exc):
        return database_unavailable(request, exc)
    if _dbapi_rolled_back(exc):
        return concurrent_change(request, exc)
    return internal_error(request, exc)


def _dbapi_unavailable(exc: DBAPIError) -> bool:
    return bool(exc.connection_invalidated) or isinstance(exc, OperationalError | InterfaceError)


def _dbapi_rolled_back(exc: DBAPIError) -> bool:
    return str(getattr(exc.orig, "sqlstate", "") or "").startswith("40")  # transaction rollback class


# Raised by the raw asyncpg connections of the hot path (SQLAlchemy wraps the others): a
# connection lost or closed, a server shutting down or starting up.
_ASYNCPG_UNAVAILABLE = (
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
)


def _unavailable(exc: BaseException) -> bool:
    """A connection lost, refused or timed out (a server that hangs), or one asyncpg closed."""
    lost = isinstance(exc, ConnectionError | OSError) and not isinstance(exc, PermissionError)
    return lost or isinstance(exc, _ASYNCPG_UNAVAILABLE)


def internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if _unavailable(exc):
        return database_unavailable(request, exc)
    if isinstance(exc, asyncpg.exceptions.TransactionRollbackError):
        return concurrent_change(request, exc)
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _json(500, "internal_error", "an internal error occurred; it has been logged")


# nginx's number for a request whose client closed the connection before the answer: not
# the service's error, and no 500 in its metrics.
CLIENT_GONE = 499
_CLIENT_GONE_DETAIL = "client disconnected prematurely"  # Litestar's words, reading the body


def status_of(exc: BaseException) -> int:
    """The status the handlers answer ``exc`` with. An error a middleware raises (a 401, a
    429, a database that is down while the key is checked) is answered outside the metrics
    middleware, which counts it by this."""
    if isinstance(exc, AppError):
        return exc.status_code
    if isinstance(exc, ValidationException):
        return 400
    if isinstance(exc, HTTPException):
        return CLIENT_GONE if exc.detail == _CLIENT_GONE_DETAIL else exc.status_code
    if isinstance(exc, PoolTimeout):
        return 503
    if isinstance(exc, DBAPIError):
        return 503 if _dbapi_unavailable(exc) else 409 if _dbapi_rolled_back(exc) else 500
    if _unavailable(exc):
        return 503
    return 409 if isinstance(exc, asyncpg.exceptions.TransactionRollbackError) else 500


HANDLERS: dict[type[Exception] | int, Any] = {
    AppError: app_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    PoolTimeout: service_busy,
    DBAPIError: dbapi_error,
    Exception: internal_error,
}
