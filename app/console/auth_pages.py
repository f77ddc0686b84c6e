"""Signing in and out of the console."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import unquote, urlsplit

from litestar import Controller, Request, Response, get, post
from litestar.params import QueryParameter
from litestar.response import Template

from app.console import sessions
from app.console.forms import form_text
from app.console.security import (
    PREFIX,
    PUBLIC,
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    SIGN_IN_MAX_BODY,
    removed_cookie,
    session_cookie,
    sign_in_cookie,
)
from app.console.web import SIGN_IN_PATH, redirect, render

HOME = "/console/knowledge"
NextPath = Annotated[str, QueryParameter(name="next", max_length=2000)]


def safe_next(target: str) -> str:
    """Where to go after signing in: a console path of this site, never another site
    (``//evil.example``, ``/console\\..``, a scheme) nor out of the console by dot segments
    (``/console/../..//evil.example``, which a browser resolves), whatever the link said."""
    parts = urlsplit(target)
    if (
        not target.startswith(PREFIX + "/")
        or parts.scheme
        or parts.netloc
        or "\\" in target
        or any(ord(c) < 0x20 for c in target)
        or any(segment in (".", "..") for segment in unquote(parts.path).split("/"))
    ):
        return HOME
    return target


class SignInController(Controller):
    path = "/"

    @get("/", summary="The console's home")
    async def home(self) -> Response[Any]:
        return redirect(HOME)

    @get("/sign-in", opt={PUBLIC: True}, summary="The sign-in form")
    async def sign_in_form(self, request: Request[Any, Any, Any], next_path: NextPath = "") -> Template:
        token = sessions.new_token()
        page = render(request, "sign_in.html", sign_in_token=token, next=safe_next(next_path), error=None)
        page.set_cookie(sign_in_cookie(token, request, request.app.state.settings.console))
        return page

    # Anyone may post here, before any key is checked: a form of millions of fields held
    # the event loop for seconds (Litestar parses it in one go), so its size is kept small.
    @post(
        "/sign-in",
        opt={PUBLIC: True},
        request_max_body_size=SIGN_IN_MAX_BODY,
        summary="Sign in with an admin API key",
    )
    async def sign_in(self, request: Request[Any, Any, Any]) -> Response[Any]:
        state = request.app.state
        form = await request.form()
        target = safe_next(form_text(form, "next"))
        try:
            token, _ = await sessions.sign_in(
                state.engine,
                form_text(form, "api_key"),
                state.settings.console,
                replacing=request.cookies.get(SESSION_COOKIE),
            )
        except sessions.SignInRefused as exc:
            # The key is never echoed back into the form.
            return render(
                request,
                "sign_in.html",
                status_code=exc.status_code,
                sign_in_token=request.cookies.get(SIGN_IN_COOKIE, ""),
                next=target,
                error=exc.message,
            )
        response = redirect(target)
        response.set_cookie(session_cookie(token, request, state.settings.console))
        response.set_cookie(removed_cookie(SIGN_IN_COOKIE))
        return response

    @post("/sign-out", summary="Sign out: the session is deleted")
    async def sign_out(self, request: Request[Any, Any, Any]) -> Response[Any]:
        await sessions.sign_out(request.app.state.engine, request.cookies.get(SESSION_COOKIE, ""))
        response = redirect(SIGN_IN_PATH, done="signed-out")
        response.set_cookie(removed_cookie(SESSION_COOKIE))
        return response
