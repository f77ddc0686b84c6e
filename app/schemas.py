"""Pieces shared by the API schemas."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, StringConstraints, WithJsonSchema
from pydantic_core import PydanticCustomError

T = TypeVar("T")

# Python's whitespace (what str.strip removes), written out: JSON Schema's \s (ECMA-262) and
# pydantic's own stripping (Rust's) each disagree with it on a few characters.
SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Characters that show nothing: zero-width spaces and joiners, direction marks and
# isolates, the soft hyphen, the byte-order mark. A title of only these looks empty.
INVISIBLE = r"\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
_VISIBLE_RE = re.compile(rf"[^{SPACE}{INVISIBLE}]")


def reject_nul(value: str) -> str:
    """PostgreSQL cannot store NUL in text: refuse it with a 422 naming the field, not a 500."""
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "must not contain NUL characters")
    return value


def strip_required(value: str) -> str:
    stripped = value.strip()
    if not stripped:
        raise PydanticCustomError("blank", "must not be empty or only whitespace")
    if not _VISIBLE_RE.search(stripped):
        raise PydanticCustomError("invisible", "must hold a visible character")
    return stripped


OUT_OF_RANGE_INSTANT = "expected a date-time between the years 1 and 9999, once in UTC"


def storable_instant(value: datetime) -> bool:
    """Whether an aware date-time stays within the years 1 to 9999 once in UTC: the driver
    sends it in UTC, and 9999-12-31T23:59:59-12:00 or 0001-01-01T00:00:00+14:00 would
    overflow there (a 500 instead of a 422)."""
    try:
        value.astimezone(UTC)
    except OverflowError:
        return False
    return True


NoNul = AfterValidator(reject_nul)
Stripped = AfterValidator(str.strip)
StrippedRequired = AfterValidator(strip_required)


# Control characters no stored text may hold (a terminal's escapes, a bell, a backspace), and
# those that are whitespace, which a one-line text (a title, a name) holds as spaces.
_CONTROLS = r"\x00-\x08\x0e-\x1b\x7f"
_CONTROL_RE = re.compile(f"[{_CONTROLS}]")
_WHITESPACE_CONTROL_RE = re.compile(r"[\t\n\x0b\x0c\r\x1c-\x1f]")


def reject_controls(value: str) -> str:
    if _CONTROL_RE.search(value):
        raise PydanticCustomError("control_character", "must not hold control characters")
    return value


def one_line(value: str) -> str:
    value = reject_controls(value)
    return _WHITESPACE_CONTROL_RE.sub(" ", value) if _WHITESPACE_CONTROL_RE.search(value) else value


OneLine = AfterValidator(one_line)
Text = AfterValidator(reject_controls)


def text_schema(max_length: int, *, required: bool) -> WithJsonSchema:
    """The JSON schema of a short text field, saying exactly what its validators accept
    (``maxLength`` counts the characters as sent, before stripping): no control character
    but whitespace, and for a required one a visible character."""
    inside = f"[^{_CONTROLS}]*"
    visible = f"[^{_CONTROLS}{SPACE}{INVISIBLE}]{inside}" if required else ""
    pattern = f"^{inside}{visible}$"
    return WithJsonSchema({"type": "string", "maxLength": max_length, "pattern": pattern})


# Short text fields a client sends to be stored: at most so many characters as sent, no NUL
# (PostgreSQL text cannot hold it) nor other control character, stored without surrounding
# whitespace; the required ones are refused when empty, only whitespace or invisible.
# Document ``content`` alone may hold them: it is extracted, never stored as text as sent.
Title = Annotated[
    str, StringConstraints(max_length=200), NoNul, StrippedRequired, OneLine, text_schema(200, required=True)
]
LongTitle = Annotated[
    str, StringConstraints(max_length=300), NoNul, StrippedRequired, OneLine, text_schema(300, required=True)
]
Description = Annotated[
    str,
    StringConstraints(max_length=2000),
    NoNul,
    Stripped,
    Text,
    text_schema(2000, required=False),
]
Name = Annotated[
    str, StringConstraints(max_length=200), NoNul, Stripped, OneLine, text_schema(200, required=False)
]


# Whether the page may be fetched (its scheme, port and host, where the host resolves to) is
# checked when the document is added; the schema says what a pattern can.
def reject_url_controls(value: str) -> str:
    """A URL's parser drops tabs and line breaks inside it without a word, so the address
    checked would not be the one stored and sent: refused (around it, they are stripped)."""
    if _URL_CONTROL_RE.search(value):
        raise PydanticCustomError("control_character", "must not hold control characters (tabs, line breaks)")
    return value


_URL_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
Url = Annotated[
    str,
    StringConstraints(max_length=2048),
    NoNul,
    StrippedRequired,
    AfterValidator(reject_url_controls),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": 2048,
            "pattern": rf"^[{SPACE}]*[Hh][Tt][Tt][Pp][Ss]?://[^\x00-\x1f\x7f]*[{SPACE}]*$",
        }
    ),
]


def refuse_non_numbers(value: object) -> object:
    """JSON's integers only: pydantic's lax mode (which Litestar asks for) reads true, false
    and "12" as integers; a number with no fraction (12.0) stays, as JSON Schema has it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


# After the field's bounds in its Annotated (``Annotated[int, Field(ge=0), JsonInteger]``), so
# pydantic's JSON schema keeps them as minimum and maximum.
JsonInteger = BeforeValidator(refuse_non_numbers)


class Input(BaseModel):
    """Request bodies: unknown fields are refused, so no client can set ``id`` or ``org_id``."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int
