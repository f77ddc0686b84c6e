"""The console's protections: the session guard, CSRF, cookies and response headers.

Every console route runs ``console_guard``: it resumes the browser's session (or sends it to
sign in), hands the handler the session's organisation as the API's ``Principal``, and
refuses a state-changing request whose CSRF token is missing or wrong. Routes marked
``opt={PUBLIC: True}`` (the sign-in form) have no session; their POST is checked against a
pre-session token instead (double submit: a cookie and the same value in the form).
"""

from __future__ import annotations

import hmac
from typing import Any, cast

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie, MutableScopeHeaders
from litestar.handlers.base import BaseRouteHandler
from litestar.types import Message, Scope

from app.auth import Principal
from app.config import ConsoleSettings
from app.console import sessions
from app.console.repository import ConsoleSession
from app.errors import Forbidden
from app.observability.logging import org_id_var

PREFIX = "/console"
STATIC_PREFIX = "/console/static/"
SESSION_COOKIE = "vk_console"
SIGN_IN_COOKIE = "vk_console_sign_in"
# The sign-in form's largest body: a key, a token and a return path fit many times over.
SIGN_IN_MAX_BODY = 16 * 1024
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
# A handler opt: the route is reached without a session (sign-in).
PUBLIC = "console_public"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}
CSRF_REFUSED = (
    "This form was sent without a valid security token (it may come from another site, or "
    "from a page older than your session). Reload the page and try again."
)


class SignInRequired(Exception):
    """No live session: the browser is sent to the sign-in page."""


def is_https(request: Request[Any, Any, Any], settings: ConsoleSettings) -> bool:
    if settings.secure_cookie == "always" or request.url.scheme == "https":
        return True
    forwarded = request.headers.get("x-forwarded-proto", "")
    return settings.trust_forwarded_proto and forwarded.split(",")[0].strip().lower() == "https"


def session_cookie(token: str, request: Request[Any, Any, Any], settings: ConsoleSettings) -> Cookie:
    # No max_age: the cookie ends with the browser; the server ends the session itself
    # (idle and absolute expiry) whatever the browser keeps.
    return Cookie(
        key=SESSION_COOKIE,
        value=token,
        path=PREFIX,
        httponly=True,
        samesite="lax",
        secure=is_https(request, settings),
    )


def sign_in_cookie(token: str, request: Request[Any, Any, Any], settings: ConsoleSettings) -> Cookie:
    return Cookie(
        key=SIGN_IN_COOKIE,
        value=token,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=is_https(request, settings),
        max_age=3600,
    )


def removed_cookie(key: str) -> Cookie:
    return Cookie(key=key, value="", path=PREFIX, httponly=True, samesite="lax", max_age=0, expires=0)


def same_token(sent: str | None, expected: str | None) -> bool:
    if not sent or not expected:
        return False
    return hmac.compare_digest(sent.encode(), expected.encode())


async def sent_csrf_token(request: Request[Any, Any, Any]) -> str | None:
    """The token from the header htmx sends, else from the form's hidden field."""
    if header := request.headers.get(CSRF_HEADER):
        return header
    if request.content_type[0] in ("application/x-www-form-urlencoded", "multipart/form-data"):
        value = (await request.form()).get(CSRF_FIELD)
        return value if isinstance(value, str) else None
    return None


async def require_csrf(request: Request[Any, Any, Any], expected: str | None) -> None:
    # Without a token to match, nothing sent can: the form is not read.
    if not expected or not same_token(await sent_csrf_token(request), expected):
        raise Forbidden(CSRF_REFUSED)


def console_session(request: Request[Any, Any, Any]) -> ConsoleSession | None:
    session: ConsoleSession | None = request.scope.get("state", {}).get("console")
    return session


async def console_guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    request = cast("Request[Any, Any, Any]", connection)
    state = request.app.state
    if handler.opt.get(PUBLIC):
        if request.method in UNSAFE_METHODS:
            await require_csrf(request, request.cookies.get(SIGN_IN_COOKIE))
        return
    token = request.cookies.get(SESSION_COOKIE, "")
    session = await sessions.resume(state.engine, token, state.settings.console) if token else None
    if session is None:
        raise SignInRequired
    request.scope.setdefault("state", {})["console"] = session
    request.scope["user"] = request.scope["auth"] = Principal(
        key_id=session.key_id, org_id=session.org_id, role="admin"
    )
    org_id_var.set(str(session.org_id))
    if request.method in UNSAFE_METHODS:
        await require_csrf(request, session.csrf_token)


def is_console_path(path: str) -> bool:
    return path in ("/", PREFIX) or path.startswith(PREFIX + "/")


async def send_console_headers(message: Message, scope: Scope) -> None:
    """``before_send`` hook: every console response, errors and static files included, gets
    the security headers; pages are never stored by the browser or a proxy (they show an
    organisation's data, and a signed-out browser's back button must not show them)."""
    if message["type"] != "http.response.start":
        return
    path: str = scope["path"]
    if not is_console_path(path):
        return
    headers = MutableScopeHeaders.from_message(message)
    for name, value in SECURITY_HEADERS.items():
        headers[name] = value
    headers["cache-control"] = "no-cache" if path.startswith(STATIC_PREFIX) else "no-store"
