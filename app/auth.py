"""Bearer API-key authentication, per-organisation rate limits, and role guards."""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass
from typing import Any

from litestar.connection import ASGIConnection
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app.config import LimitSettings
from app.db.engine import raw_connection
from app.errors import Forbidden, TooManyRequests, Unauthorized
from app.keys.repository import AUTHENTICATE_SQL
from app.keys.service import hash_key
from app.observability.logging import org_id_var
from app.observability.metrics import RATE_LIMITED

PUBLIC_PATHS = {"/health", "/ready", "/metrics"}
WINDOW_S = 60
# The voice runtime's calls: the tool declaration at a session's start, then the questions.
_RUNTIME_PATH = re.compile(r"^/api/agents/[^/]+/(?:query_knowledge(?:/stream)?|tool)$")
_SLASHES = re.compile(r"/{2,}")
# Keys whose organisation a process remembers for the cap on calls in progress; past this
# many (a key is 32 bytes and a UUID), it starts again.
_KEYS_REMEMBERED = 10_000


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: uuid.UUID
    org_id: uuid.UUID
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def budget_for(path: str) -> str:
    """The budget a request to ``path`` counts against: the voice runtime's calls and
    management calls have separate ones, so a bulk upload script cannot starve live calls
    (and the reverse). A query key counts against "query" whatever it asks for
    (AUTHENTICATE_SQL). The router takes "//" as "/" and ignores a trailing "/": so does this."""
    if _RUNTIME_PATH.match(_SLASHES.sub("/", path).rstrip("/")):
        return "query"
    return "manage"


def budget_limit(budget: str, limits: LimitSettings) -> int:
    return limits.query_per_minute if budget == "query" else limits.manage_per_minute


def _is_public(scope: Scope) -> bool:
    path: str = scope["path"]
    # The console signs in with a key once and then uses its own session (app/console).
    return (
        path in PUBLIC_PATHS
        or path.startswith("/schema")
        or path in ("/", "/console")
        or path.startswith("/console/")
    )


class ApiKeyAuthMiddleware(ASGIMiddleware):
    """Authenticates the key, counts the request against its organisation's budget (one
    statement), bounds the organisation's voice-runtime calls in flight in this process, and
    adds ``RateLimit-*`` headers to the response."""

    scopes = (ScopeType.HTTP,)
    should_bypass_for_scope = staticmethod(_is_public)

    def __init__(self) -> None:
        # The per-minute budget bounds a rate, not a burst: 500 calls of one organisation at
        # once took every pooled connection, and another organisation's call waited 4.2 s.
        # A question is counted before its key's statement: counted after it, a burst's calls
        # all queued for pooled connections first, and past the pool's timeout they were 503s.
        # It counts against its organisation when this process knows the key's organisation,
        # else against the key itself, and then against the organisation too once the
        # statement names it. Every call under the cap is still looked up, so a revoked key is
        # refused (401) on its next call.
        self._in_flight: dict[uuid.UUID | bytes, int] = {}
        self._org_of_key: dict[bytes, uuid.UUID] = {}

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        state = scope["app"].state
        sent = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(sent) > 1:
            # Which one is meant? A proxy and a client may each have added one.
            raise Unauthorized("send one Authorization header, not several")
        scheme, _, token = (sent[0] if sent else b"").decode("latin-1").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        if len(token) > 200:
            raise Unauthorized("unknown or revoked API key")
        limits = state.settings.limits
        budget = budget_for(scope["path"])
        # Questions only: the tool declaration (a GET) is read once as a call starts, and a
        # call started without it has no knowledge at all.
        asks = scope["type"] == ScopeType.HTTP and scope["method"] == "POST"
        cap = limits.query_in_flight if asks else 0
        hashed = hash_key(token)
        if not cap or budget != "query":
            await self._authenticated(scope, receive, send, next_app, hashed, budget, cap, None)
            return
        held_by: uuid.UUID | bytes = self._org_of_key.get(hashed, hashed)
        if isinstance(held_by, uuid.UUID):
            org_id_var.set(str(held_by))
        self._take_call(held_by, cap)
        try:
            await self._authenticated(scope, receive, send, next_app, hashed, budget, cap, held_by)
        finally:
            self._end_call(held_by)

    async def _authenticated(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        next_app: ASGIApp,
        hashed: bytes,
        budget: str,
        cap: int,
        held_by: uuid.UUID | bytes | None,
    ) -> None:
        """The rest of ``handle``: the key's statement, its budget, then the request. A call
        counted against its key (``held_by``), or not counted, takes its organisation's place
        in the cap here. ``budget`` is the path's; the statement may answer another (a query
        key counts against "query" whatever it asks for)."""
        state = scope["app"].state
        limits = state.settings.limits
        async with raw_connection(state.engine) as conn:
            row = await conn.fetchrow(
                AUTHENTICATE_SQL,
                hashed,
                budget,
                WINDOW_S,
                limits.query_per_minute > 0,
                limits.manage_per_minute > 0,
                # A call of the voice runtime has its deadline; a database that hangs must
                # not hold it longer (TimeoutError: 503). Others wait for the statement cap.
                timeout=state.settings.query.deadline_s if budget == "query" else None,
            )
        if row is None:
            self._org_of_key.pop(hashed, None)
            raise Unauthorized("unknown or revoked API key")
        principal = Principal(key_id=row["id"], org_id=row["org_id"], role=row["role"])
        scope["user"] = scope["auth"] = principal
        org_id_var.set(str(principal.org_id))

        budget = row["budget"]
        limit = budget_limit(budget, limits)
        rate_headers: dict[str, str] = {}
        if row["count"] is not None:
            reset = max(1, math.ceil(row["window_start"] + WINDOW_S - row["now"]))
            remaining = max(0, limit - row["count"])
            rate_headers = {
                "RateLimit-Limit": str(limit),
                "RateLimit-Remaining": str(remaining),
                "RateLimit-Reset": str(reset),
                "RateLimit-Policy": f"{limit};w={WINDOW_S}",
            }
            if row["count"] > limit:
                RATE_LIMITED.labels(budget).inc()
                raise TooManyRequests(
                    f"rate limit of {limit} {budget} requests per minute reached; retry in {reset} s",
                    headers={**rate_headers, "Retry-After": str(reset)},
                )

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start" and rate_headers:
                response_headers = MutableScopeHeaders.from_message(message)
                for name, value in rate_headers.items():
                    response_headers[name] = value
            await send(message)

        if not cap or budget != "query" or isinstance(held_by, uuid.UUID):
            await next_app(scope, receive, send_with_limits)
            return
        org = principal.org_id
        # Remembered even when refused below: the key's next calls are then refused before
        # their statement while its organisation is at the cap.
        if len(self._org_of_key) >= _KEYS_REMEMBERED:
            self._org_of_key.clear()
        self._org_of_key[hashed] = org
        self._take_call(org, cap, rate_headers)
        try:
            await next_app(scope, receive, send_with_limits)
        finally:
            self._end_call(org)

    def _take_call(
        self, unit: uuid.UUID | bytes, cap: int, rate_headers: dict[str, str] | None = None
    ) -> None:
        held = self._in_flight.get(unit, 0)
        if held >= cap:
            RATE_LIMITED.labels("query_in_flight").inc()
            whose = "with this key" if isinstance(unit, bytes) else "of this organisation"
            raise TooManyRequests(
                f"{cap} calls {whose} are already in progress here; retry shortly",
                headers={**(rate_headers or {}), "Retry-After": "1"},
            )
        self._in_flight[unit] = held + 1

    def _end_call(self, unit: uuid.UUID | bytes) -> None:
        if (left := self._in_flight[unit] - 1) > 0:
            self._in_flight[unit] = left
        else:
            del self._in_flight[unit]


def admin_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    principal: Principal = connection.auth
    if not principal.is_admin:
        raise Forbidden("this API key has the 'query' role; managing knowledge needs an 'admin' key")
