"""Pieces shared by the API schemas."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints
from pydantic_core import PydanticCustomError

T = TypeVar("T")


def reject_nul(value: str) -> str:
    """PostgreSQL cannot store NUL in text: refuse it with a 422 naming the field, not a 500."""
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "must not contain NUL characters")
    return value


NoNul = AfterValidator(reject_nul)
"""Every short text field a client sends to be stored ends with this marker (after its
``StringConstraints``, so whitespace is stripped and lengths are checked first). Document
``content`` alone may hold NUL: it is extracted, never stored as text as sent."""

Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), NoNul]
LongTitle = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300), NoNul]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000), NoNul]
Name = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200), NoNul]
Url = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2048), NoNul]


class Input(BaseModel):
    """Request bodies: unknown fields are refused, so no client can set ``id`` or ``org_id``."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int
