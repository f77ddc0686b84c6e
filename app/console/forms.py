"""Reading a console form: its fields as text, whole numbers and ids, checked by the API's
own schemas, with every refusal named by the field it belongs to (``FieldErrors``) so the
page can show the form again with each message beside its field."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from litestar.datastructures import FormMultiDict
from pydantic import BaseModel, ValidationError

from app.errors import AppError

FieldErrors = dict[str, str]
Schema = TypeVar("Schema", bound=BaseModel)


def form_text(form: FormMultiDict, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def form_values(form: FormMultiDict, names: Iterable[str]) -> dict[str, str]:
    """The named fields as given, to validate and to show again if refused."""
    return {name: form_text(form, name) for name in names}


def form_int(form: FormMultiDict, name: str, errors: FieldErrors) -> int | None:
    """A whole number from a text field; empty is None; anything else is an error on it."""
    raw = form_text(form, name).strip()
    if not raw:
        return None
    if not raw.isascii() or not raw.lstrip("-").isdigit() or len(raw) > 12:
        errors[name] = "Enter a whole number."
        return None
    return int(raw)


def parse_uuid(value: str, name: str, errors: FieldErrors, message: str) -> uuid.UUID | None:
    """An id typed or chosen in field ``name``; anything else is ``message`` on it."""
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        errors[name] = message
        return None


def validated(
    schema: type[Schema], data: Mapping[str, Any], errors: FieldErrors | None = None
) -> tuple[Schema | None, FieldErrors]:
    """``data`` checked by ``schema``: the result, or None and what it refused, then the
    ``errors`` the form's own parsing found (which keep their message)."""
    try:
        return schema.model_validate(data), dict(errors or {})
    except ValidationError as exc:
        return None, {**validation_errors(exc), **(errors or {})}


def validation_errors(exc: ValidationError) -> FieldErrors:
    errors: FieldErrors = {}
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else "form"
        errors.setdefault(name, err["msg"])
    return errors


def app_error_fields(exc: AppError) -> FieldErrors:
    """The fields a service's error names (``extra``), else the whole form."""
    fields = exc.extra if isinstance(exc.extra, list) else []
    named = {str(f["field"]): str(f["message"]) for f in fields if isinstance(f, dict) and "field" in f}
    return named or {"form": exc.detail}
