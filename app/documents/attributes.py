"""A document's tags, attributes and validity window: what a call's filters select by, and
when the document may answer at all (docs/INTEGRATION.md, "Filters and freshness").

Tags are short labels, kept in lower case so a filter need not guess how they were typed.
Attributes are string keys (lower-case identifiers such as ``locale``, ``product_line``) to
string values, kept as given (``en-GB``). Both are bounded: they travel with every filtered
call and into the tool declaration the voice model reads.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.errors import ValidationFailed
from app.schemas import OUT_OF_RANGE_INSTANT, storable_instant

MAX_TAGS = 20
MAX_TAG_LENGTH = 50
MAX_ATTRIBUTES = 20
MAX_VALUE_LENGTH = 100
KEY_PATTERN = r"^[a-z][a-z0-9_]{0,39}$"
# Printable, no control characters, something besides spaces; checked after stripping.
_VALUE_PATTERN = r"^[^\x00-\x1f\x7f]*[^\x00-\x20\x7f][^\x00-\x1f\x7f]*$"

Availability = Literal["active", "expired", "not_yet_effective"]


# The patterns ask for a character above ASCII space: only ASCII white space is trimmed, so
# what is kept is never empty.
_ASCII_SPACE = "\t\n\x0b\x0c\r "
_ASCII_SPACES = re.compile(f"[{_ASCII_SPACE}]+")
# RFC 3339, what OpenAPI's date-time means: a full date, a time and a zone. A number would
# otherwise be read as seconds since 1970.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


def _lower(value: str) -> str:
    return _ASCII_SPACES.sub(" ", value).strip(" ").lower()


def _strip(value: str) -> str:
    return value.strip(_ASCII_SPACE)


def _rfc3339(value: object) -> object:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise PydanticCustomError(
            "rfc3339", "expected an RFC 3339 date-time with its zone, e.g. 2026-11-25T09:00:00Z"
        )
    return value


def _storable(value: datetime) -> datetime:
    if not storable_instant(value):
        raise PydanticCustomError("instant_range", OUT_OF_RANGE_INSTANT)
    return value


Timestamp = Annotated[AwareDatetime, BeforeValidator(_rfc3339), AfterValidator(_storable)]


Tag = Annotated[
    str,
    StringConstraints(max_length=MAX_TAG_LENGTH, pattern=_VALUE_PATTERN),
    AfterValidator(_lower),
]
AttributeKey = Annotated[str, StringConstraints(pattern=KEY_PATTERN)]
AttributeValue = Annotated[
    str,
    StringConstraints(max_length=MAX_VALUE_LENGTH, pattern=_VALUE_PATTERN),
    AfterValidator(_strip),
]


def unique_tags(tags: list[str]) -> list[str]:
    """Each tag once, in the order first given ("FAQ" and "faq" are one tag)."""
    return list(dict.fromkeys(tags))


Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS), AfterValidator(unique_tags)]
Attributes = Annotated[
    dict[AttributeKey, AttributeValue],
    Field(max_length=MAX_ATTRIBUTES, json_schema_extra={"additionalProperties": False}),
]

TAGS_DESCRIPTION = (
    f"Short labels (at most {MAX_TAGS}, each at most {MAX_TAG_LENGTH} characters), kept in lower case; "
    "query_knowledge's `filters.tags` selects by them."
)
ATTRIBUTES_DESCRIPTION = (
    f"String keys (lower-case identifiers, e.g. `locale`, `product_line`) to string values (at most "
    f"{MAX_VALUE_LENGTH} characters, kept as given), at most {MAX_ATTRIBUTES}; query_knowledge's "
    "`filters.attributes` selects by them."
)
EFFECTIVE_FROM_DESCRIPTION = "With a time zone. Before it the document is never retrieved."
EXPIRES_AT_DESCRIPTION = (
    "With a time zone, after `effective_from`. From it on the document is never retrieved."
)


def check_window(effective_from: datetime | None, expires_at: datetime | None) -> None:
    if effective_from is not None and expires_at is not None and expires_at <= effective_from:
        raise PydanticCustomError("window_order", "expires_at must be after effective_from")


class DocumentAttributesIn(BaseModel):
    """The attribute fields of a new document (JSON bodies and multipart form fields)."""

    tags: Tags = Field(default_factory=list, description=TAGS_DESCRIPTION)
    attributes: Attributes = Field(default_factory=dict, description=ATTRIBUTES_DESCRIPTION)
    effective_from: Timestamp | None = Field(None, description=EFFECTIVE_FROM_DESCRIPTION)
    expires_at: Timestamp | None = Field(None, description=EXPIRES_AT_DESCRIPTION)

    @model_validator(mode="after")
    def _window_in_order(self) -> Self:
        check_window(self.effective_from, self.expires_at)
        return self


def availability(effective_from: datetime | None, expires_at: datetime | None, now: datetime) -> Availability:
    """Whether query_knowledge may retrieve the document at ``now`` (the rule the agent's
    context statement applies in SQL: effective_from <= now < expires_at)."""
    if expires_at is not None and expires_at <= now:
        return "expired"
    if effective_from is not None and effective_from > now:
        return "not_yet_effective"
    return "active"


def form_attributes(form: Any) -> dict[str, Any]:
    """The attribute fields of a multipart upload as a JSON body would give them: ``tags``
    repeated or comma-separated, ``attributes`` as a JSON object, the dates as ISO 8601."""
    fields: dict[str, Any] = {}
    tags = [t.strip() for value in form.getall("tags", []) for t in str(value).split(",") if t.strip()]
    if tags:
        fields["tags"] = tags
    raw = form.get("attributes")
    if raw is not None and str(raw).strip():
        try:
            fields["attributes"] = json.loads(str(raw))
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
            raise ValidationFailed(
                "invalid request body: attributes",
                extra=[{"field": "attributes", "message": "a JSON object of string values"}],
            ) from None
    for name in ("effective_from", "expires_at"):
        value = form.get(name)
        if value is not None and str(value).strip():
            fields[name] = str(value).strip()
    return fields
