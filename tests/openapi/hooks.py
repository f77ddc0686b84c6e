"""Schemathesis hooks for tests/openapi/schemathesis.toml, loaded by the Schemathesis process."""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.core.parameters import ParameterLocation

from app.config import IngestionSettings

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
    return not (negative and case.media_type == "multipart/form-data")
