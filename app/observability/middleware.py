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


def request_id_middleware(app: ASGIApp) -> ASGIApp:
    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        incoming = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"").decode("latin-1")
        request_id = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        tokens = [request_id_var.set(request_id), org_id_var.set(None)]
        agent = _AGENT_PATH.match(scope["path"])
        agent_token = agent_id_var.set(agent.group(1) if agent else None)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableScopeHeaders.from_message(message)["X-Request-ID"] = request_id
            await send(message)

        try:
            await app(scope, receive, send_with_id)
        finally:
            agent_id_var.reset(agent_token)
            org_id_var.reset(tokens[1])
            request_id_var.reset(tokens[0])

    return middleware
