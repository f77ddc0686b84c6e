"""Pieces shared by the API schemas."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints

T = TypeVar("T")

Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
LongTitle = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]
Description = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000)]


class Input(BaseModel):
    """Request bodies: unknown fields are refused, so no client can set ``id`` or ``org_id``."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int
