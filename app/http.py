"""Shared HTTP-layer pieces: dependency providers and parameter types."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypeVar

from litestar import Request
from litestar.datastructures import State
from litestar.params import QueryParameter
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.auth import Principal
from app.errors import BadRequest, ValidationFailed

M = TypeVar("M", bound=BaseModel)

Limit = Annotated[int, QueryParameter(ge=1, le=200, description="Page size (at most 200).")]
Offset = Annotated[int, QueryParameter(ge=0, le=1_000_000, description="Items to skip.")]


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


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("the request body is not valid JSON") from exc


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
