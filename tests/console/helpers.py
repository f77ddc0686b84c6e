"""Helpers for console tests: signing in as a browser does, and reading pages."""

from __future__ import annotations

import html
import re
from collections import Counter
from html.parser import HTMLParser
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]

_META_CSRF = re.compile(r'<meta name="csrf-token" content="([^"]+)">')
_FIELD_CSRF = re.compile(r'<input type="hidden" name="csrf_token" value="([^"]*)">')


def csrf_from(page: str) -> str:
    """The session's CSRF token as a page carries it (meta tag for htmx)."""
    found = _META_CSRF.search(page)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def sign_in_token(page: str) -> str:
    found = _FIELD_CSRF.search(page)
    assert found, "the sign-in form carries no token"
    return found.group(1)


async def sign_in(client: Client, key: str) -> str:
    """Sign in through the form, as a browser: fetch it (pre-session cookie), post the key;
    returns the session's CSRF token."""
    form = await client.get("/console/sign-in")
    assert form.status_code == 200, form.text
    r = await client.post(
        "/console/sign-in",
        data={"api_key": key, "csrf_token": sign_in_token(form.text), "next": ""},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    page = await client.get(r.headers["location"])
    assert page.status_code == 200, page.text
    return csrf_from(page.text)


def form(csrf: str, **fields: Any) -> dict[str, Any]:
    return {"csrf_token": csrf, **fields}


_INLINE_TAG = re.compile(r"</?(a|strong|em|span|code|time|abbr)\b[^>]*>")


def text_of(page: str) -> str:
    """The page's text as read: tags gone (inline ones without a gap), entities decoded,
    whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", _INLINE_TAG.sub("", page))).split())


_CONTROL = re.compile(r"<(input|textarea|select)\b([^>]*)>")


def assert_labelled(page: str) -> None:
    """Every visible form control has an id and a <label for> naming it."""
    for tag, attributes in _CONTROL.findall(page):
        if 'type="hidden"' in attributes:
            continue
        found = re.search(r'\sid="([^"]+)"', attributes)
        assert found, f"<{tag}{attributes}> has no id"
        assert f'<label for="{found.group(1)}">' in page, f"<{tag} id={found.group(1)}> has no label"


class _Ids(HTMLParser):
    """Every id of a page, and each label's ``for`` and each control's id with the form
    (its position among the page's forms; None outside any) that holds it."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.labels: list[tuple[str, int | None]] = []
        self.controls: set[tuple[str, int | None]] = set()
        self._forms = 0
        self._form: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self._form = self._forms
            self._forms += 1
        if (id_ := attributes.get("id")) is not None:
            self.ids.append(id_)
            if tag in ("input", "textarea", "select"):
                self.controls.add((id_, self._form))
        if tag == "label" and (target := attributes.get("for")) is not None:
            self.labels.append((target, self._form))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None


def assert_ids_unique(page: str, where: str = "") -> None:
    """No id twice on the page, and every <label for> names a control in its own form."""
    found = _Ids()
    found.feed(page)
    assert found.ids, f"{where}: the page has no ids at all"
    twice = [id_ for id_, n in Counter(found.ids).items() if n > 1]
    assert twice == [], f"{where}: ids used more than once: {twice}"
    astray = [target for target, form_ in found.labels if (target, form_) not in found.controls]
    assert astray == [], f"{where}: labels naming no control of their own form: {astray}"
