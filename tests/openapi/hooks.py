"""Schemathesis hooks for tests/openapi/schemathesis.toml, loaded by the Schemathesis process."""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.core.parameters import ParameterLocation

from app.config import IngestionSettings
from app.documents.attributes import DocumentAttributesIn, form_attributes
from app.errors import ValidationFailed

DEFAULT_CHUNK_TOKENS = IngestionSettings().chunk_tokens


@schemathesis.hook("filter_case").apply_to(name="POST /api/knowledge")
def overlap_within_chunk(context: Any, case: Any) -> bool:
    """A knowledge base's chunk overlap is at most half its chunk size (or of the default
    size, when the request gives none): a rule between two fields that a JSON schema cannot
    state, so the field's description does. Generated requests keep to it; tests/knowledge
    checks the 422 for those that do not."""
    body = case.body
    if not isinstance(body, dict):
        return True
    overlap = body.get("chunk_overlap_tokens")
    chunk = body.get("chunk_tokens")
    if chunk is None:
        chunk = DEFAULT_CHUNK_TOKENS
    if _number(overlap) and _number(chunk):
        return bool(overlap <= chunk // 2)
    return True


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@schemathesis.hook("filter_case").apply_to(name="POST /api/knowledge/{kb_id}/documents")
def no_negative_multipart(context: Any, case: Any) -> bool:
    """Negative multipart bodies are left out: every form part reaches the service as text
    (or bytes), so a title "generated" as false or a file as 81474 arrives as the valid text
    "false" or "81474", and Schemathesis reads the acceptance as a failure. The multipart
    refusals (no file, unknown fields, a NUL in the file name, limits) are tested in
    tests/documents."""
    negative = case.meta is not None and case.meta.is_negative_at(ParameterLocation.BODY)
    if negative:
        return case.media_type != "multipart/form-data"
    return _attributes_valid(case)


class _Form:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body

    def get(self, name: str) -> Any:
        value = self.body.get(name)
        return value[0] if isinstance(value, list) and value else value

    def getall(self, name: str, default: list[Any]) -> list[Any]:
        value = self.body.get(name)
        if value is None:
            return default
        return value if isinstance(value, list) else [value]


def _attributes_valid(case: Any) -> bool:
    """A new document's validity window must end after it starts, and an upload's tags and
    attributes are form text the service parses (tags separated by commas, attributes as a
    JSON object): rules a JSON schema cannot state, so the fields' descriptions do.
    Generated requests keep to them; tests/documents/test_attributes.py checks the 422s."""
    body = case.body
    if not isinstance(body, dict):
        return True
    fields = set(DocumentAttributesIn.model_fields)
    try:
        given = form_attributes(_Form(body)) if case.media_type == "multipart/form-data" else body
        DocumentAttributesIn.model_validate({k: v for k, v in given.items() if k in fields})
    except (ValueError, ValidationFailed):
        return False
    return True
