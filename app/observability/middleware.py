"""Request ids: accepted from ``X-Request-ID`` (when it looks sane) or made here, returned
on every response and attached to every log line of the request."""

from __future__ import annotations

import re
import uuid

from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from app.observability.logging import agent_id_var, org_id_var, request_id_var

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_AGENT_PATH = re.compile(r"^/api/agents/([0-9a-fA-F-]{36})/")
_STATE_KEY = "request_id"


def request_id_of(scope: Scope) -> str:
    """The request's id: the client's ``X-Request-ID`` when it looks sane, else a new one,
    chosen once per request and kept in the scope's state."""
    state = scope.setdefault("state", {})
    found: str | None = state.get(_STATE_KEY)
    if found is None:
        incoming = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"").decode("latin-1")
        found = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        state[_STATE_KEY] = found
    return found


def request_id_middleware(app: ASGIApp) -> ASGIApp:
    """Binds the request id (and the agent id of the path) to the log lines of the request."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        tokens = [request_id_var.set(request_id_of(scope)), org_id_var.set(None)]
        agent = _AGENT_PATH.match(scope["path"])
        agent_token = agent_id_var.set(agent.group(1) if agent else None)
        try:
            await app(scope, receive, send)
        finally:
            agent_id_var.reset(agent_token)
            org_id_var.reset(tokens[1])
            request_id_var.reset(tokens[0])

    return middleware


async def send_request_id(message: Message, scope: Scope) -> None:
    """``before_send`` hook: the response carries ``X-Request-ID``.

    A hook rather than the middleware's own ``send``: errors raised by a middleware (401 and
    429 from authentication) and routing errors (404, 405) are answered by Litestar's
    outermost exception handler, with the ``send`` the middleware never wrapped.
    """
    if message["type"] == "http.response.start":
        MutableScopeHeaders.from_message(message)["X-Request-ID"] = request_id_of(scope)
