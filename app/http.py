"""Shared HTTP-layer pieces: dependency providers and parameter types."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

import msgspec
from litestar import Litestar, Request
from litestar.datastructures import FormMultiDict, MutableScopeHeaders, State
from litestar.enums import RequestEncodingType
from litestar.exceptions import ClientException, SerializationException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.handlers import HTTPRouteHandler
from litestar.params import BodyKwarg, QueryParameter
from litestar.routes import HTTPRoute
from litestar.types import Message, Scope
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal
from app.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType, ValidationFailed, size_text
from app.schemas import OUT_OF_RANGE_INSTANT, storable_instant

M = TypeVar("M", bound=BaseModel)

Limit = Annotated[int, QueryParameter(ge=1, le=200, description="Page size (at most 200).")]
Offset = Annotated[int, QueryParameter(ge=0, le=1_000_000, description="Items to skip.")]

# RFC 3339 (what OpenAPI's date-time means): a full date, a time and a zone. Litestar's
# datetime parameters also take a number of seconds since 1970 ("until=0.5" is 1970) and
# times without a zone, which no client means; so the parameters are parsed here.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


def _instant_parameter(bound: str) -> Any:
    return QueryParameter(
        description=f"Calls {bound}: an RFC 3339 date-time with its zone, e.g. 2026-11-25T09:00:00Z.",
        schema_extra={"format": "date-time"},
    )


@dataclass(frozen=True, slots=True)
class TimeWindow:
    since: datetime | None = None
    until: datetime | None = None


def parse_instant(name: str, value: str | None) -> datetime | None:
    """A query parameter's RFC 3339 date-time; a 400 naming the parameter otherwise."""
    if value is None:
        return None
    try:
        if not _RFC3339.match(value):
            raise ValueError(value)
        instant = datetime.fromisoformat(value.upper())
    except ValueError:
        hint = " (a '+' in a query string must be sent as %2B)" if " " in value else ""
        message = f"expected an RFC 3339 date-time with its zone, e.g. 2026-11-25T09:00:00Z{hint}"
        raise BadRequest(f"invalid parameters: {name}", extra=[{"field": name, "message": message}]) from None
    if not storable_instant(instant):
        extra = [{"field": name, "message": OUT_OF_RANGE_INSTANT}]
        raise BadRequest(f"invalid parameters: {name}", extra=extra)
    return instant


def provide_time_window(
    since: Annotated[str | None, _instant_parameter("at or after this time")] = None,
    until: Annotated[str | None, _instant_parameter("before this time")] = None,
) -> TimeWindow:
    """The ``since`` (inclusive) and ``until`` (exclusive) query parameters of a listing."""
    return TimeWindow(parse_instant("since", since), parse_instant("until", until))


async def provide_session(state: State) -> AsyncIterator[AsyncSession]:
    # Services commit what they change; anything left uncommitted (an error) rolls back
    # when the session closes, so a failed request changes nothing.
    async with state.sessionmaker() as session:
        yield session


def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    principal: Principal = request.auth
    return principal


def field_errors(exc: ValidationError) -> list[dict[str, str]]:
    return [
        {"field": ".".join(str(p) for p in err["loc"]) or "body", "message": err["msg"]}
        for err in exc.errors()
    ]


NOT_UTF8 = "the request body is not valid UTF-8"
TOO_DEEP = "the request body is nested too deeply"
BODY_REQUIRED = "the request body is required"
NOT_JSON_MEDIA_TYPE = "Content-Type must be application/json"

# A \uD800-\uDBFF escape not followed by a \uDC00-\uDFFF one, or the latter alone.
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def json_error(raw: bytes, exc: BaseException) -> BadRequest:
    """The 400 for a JSON body msgspec could not decode, saying why in words a client can act on."""
    if isinstance(exc, UnicodeDecodeError):
        return BadRequest(NOT_UTF8)
    if isinstance(exc, RecursionError):
        return BadRequest(TOO_DEEP)
    # msgspec says "Input data was truncated" for an unpaired surrogate escape too: a string
    # no UTF-8 can carry. Other syntax errors keep the one message clients already match.
    if str(exc) == "Input data was truncated" and _LONE_SURROGATE.search(raw):
        return BadRequest(
            "the request body is not valid JSON: a string holds an unpaired surrogate escape "
            "(\\ud800-\\udfff), which is not text UTF-8 can carry"
        )
    return BadRequest("the request body is not valid JSON")


def parse_json(raw: bytes) -> Any:
    """Decode a JSON body read by the handler itself, as ``ApiRequest.json`` does the others."""
    if not raw.strip():
        raise BadRequest(BODY_REQUIRED)
    # json.loads, used here before, tolerated a UTF-8 byte-order mark (RFC 8259 allows it).
    raw = raw.removeprefix(b"\xef\xbb\xbf")
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise json_error(raw, exc) from exc


class ApiRequest(Request[Any, Any, Any]):
    """Litestar's request, with body decoding failures answered as 4xx in this service's words.

    msgspec raises ``UnicodeDecodeError`` for invalid UTF-8 in a string and ``RecursionError``
    for deeply nested arrays or objects, and Litestar's multipart parser ``UnicodeDecodeError``
    or ``LookupError`` for a form field it cannot decode: all reached the 500 handler. They are
    caught here, around the decoding alone, so the same errors raised anywhere else stay 500s.
    """

    async def json(self) -> Any:
        try:
            return await super().json()
        except (SerializationException, UnicodeDecodeError, RecursionError) as exc:
            cause = exc.__cause__ if isinstance(exc, SerializationException) and exc.__cause__ else exc
            raise json_error(await self.body(), cause) from exc

    async def form(self) -> FormMultiDict:
        try:
            return await super().form()
        except UnicodeDecodeError as exc:
            raise BadRequest(f"{NOT_UTF8} (in a form field)") from exc
        except LookupError as exc:
            raise BadRequest("a form field names an unknown charset") from exc
        except RequestEntityTooLarge as exc:  # the body itself: more bytes than the route takes
            limit = self.route_handler.resolve_request_max_body_size()
            raise PayloadTooLarge(
                f"the request body is larger than the limit of {size_text(limit or 0)}"
            ) from exc
        except ClientException as exc:
            # Litestar reports a parser limit (parts, part headers) as a 400 "Request Entity
            # Too Large"; answer 413 and say which limit.
            if exc.detail != "Request Entity Too Large":
                raise
            reason = str(exc.__context__ or "")
            if "segment count" in reason:
                detail = f"the form has more than {self.app.multipart_form_part_limit} parts"
            else:
                detail = "a form part's headers are too long or too many"
            raise PayloadTooLarge(detail) from exc


def _json_media_type(media_type: str) -> bool:
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _json_body_optional(handler: HTTPRouteHandler) -> bool | None:
    """Whether the handler's ``data`` is an optional JSON body; None if it takes no JSON body."""
    field = handler.parsed_fn_signature.parameters.get("data")
    if field is None:
        return None
    kwarg = field.kwarg_definition
    if isinstance(kwarg, BodyKwarg) and kwarg.media_type != RequestEncodingType.JSON:
        return None
    return field.is_optional


async def require_json_body(request: Request[Any, Any, Any]) -> None:
    """``before_request`` for every route: a handler taking a JSON ``data`` body is sent one.

    Another media type is a 415 (Litestar would parse text/plain or no Content-Type as JSON,
    and answer XML or a form with "JSON is malformed"); no body at all is a 400, rather than a
    422 naming the handler's parameter. Handlers reading the body themselves (document upload)
    and bodiless routes are left alone. Runs after authentication and guards.
    """
    optional = _json_body_optional(request.route_handler)
    if optional is None:
        return None
    media_type = request.content_type[0]
    if media_type and not _json_media_type(media_type):
        raise UnsupportedMediaType(NOT_JSON_MEDIA_TYPE)
    if not await request.body():
        if optional:
            return None
        raise BadRequest(BODY_REQUIRED)
    if not media_type:
        raise UnsupportedMediaType(NOT_JSON_MEDIA_TYPE)
    return None


def refuse_null_parameters(request: Request[Any, Any, Any]) -> None:
    """A query parameter sent as the text ``null`` is refused unless it is text.

    Litestar parses parameters with msgspec's lax conversion, which reads "null" as None for
    an optional parameter of any other type: ``agent_id=null`` silently meant no filter.
    """
    sent = {name for name, value in request.query_params.multi_items() if value == "null"}
    if not sent:
        return
    for name, field in request.route_handler.parsed_fn_signature.parameters.items():
        alias = getattr(field.kwarg_definition, "query", None) or name
        if alias in sent and field.is_optional and not field.has_inner_subclass_of(str):
            raise BadRequest(
                f"invalid parameters: {alias}",
                extra=[{"field": alias, "message": "null is not a value; leave the parameter out instead"}],
            )


async def check_request(request: Request[Any, Any, Any]) -> None:
    """``before_request`` for every route: after authentication and guards, before the
    handler's parameters are parsed."""
    refuse_null_parameters(request)
    await require_json_body(request)


def validate_obj(model: type[M], obj: Any) -> M:
    """Validate a parsed JSON body with this service's error shape (422 naming the fields)."""
    if not isinstance(obj, dict):
        raise ValidationFailed(
            "the request body must be a JSON object",
            extra=[{"field": "body", "message": "expected an object"}],
        )
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        fields = field_errors(exc)
        names = ", ".join(sorted({f["field"] for f in fields}))
        raise ValidationFailed(f"invalid request body: {names}", extra=fields) from exc


def _allowed_methods(app: Litestar, path_template: str) -> str | None:
    """The path's methods as an ``Allow`` header, from the app's finished routes."""
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path_format == path_template:
            return ", ".join(sorted(route.methods))
    return None


async def send_allowed_methods(message: Message, scope: Scope) -> None:
    """``before_send`` hook: an OPTIONS answer lists every method of its path.

    Litestar 2 makes a path's OPTIONS handler when the path's first handler is registered and
    never updates it (litestar-org/litestar#4169, fixed in 3.0): ``OPTIONS /api/keys``
    answered ``Allow: OPTIONS, POST`` although ``GET /api/keys`` exists too.
    """
    if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
        return
    headers = MutableScopeHeaders.from_message(message)
    methods = _allowed_methods(scope["app"], scope.get("path_template", ""))
    if "allow" in headers and methods is not None:
        headers["Allow"] = methods
