"""Every route documents the error responses it can give, in the service's one error
shape, so clients (and Schemathesis) can rely on the schema."""

from __future__ import annotations

from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from pydantic import BaseModel


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    error: str
    detail: str
    fields: list[FieldError] | None = None


_DESCRIPTIONS = {
    400: "Malformed request: bad JSON, bad path or query parameter",
    401: "Missing, unknown or revoked API key",
    403: "The key's role may not do this, or a quota is reached",
    404: "No such resource in this organisation",
    409: "Conflicts with the current state",
    413: "The body is larger than the configured limit",
    415: "Unsupported content or file type",
    422: "The body failed validation; `fields` names each problem",
    429: "Rate limit reached; see Retry-After and RateLimit-* headers",
    503: "The database is unavailable; see Retry-After",
}
PUBLIC = {"/health", "/ready", "/metrics"}


def document_errors(app: Litestar) -> None:
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            if not isinstance(handler, HTTPRouteHandler):
                continue
            codes = [503] if route.path in PUBLIC else list(_DESCRIPTIONS)
            specs = {
                code: ResponseSpec(data_container=ErrorBody, description=_DESCRIPTIONS[code])
                for code in codes
            }
            handler.responses = {**specs, **(handler.responses or {})}
